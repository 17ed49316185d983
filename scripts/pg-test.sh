#!/usr/bin/env bash
# Starts a throwaway PostgreSQL on loopback for the inventory store tests.
#
#   eval "$(scripts/pg-test.sh start)"   # exports BOOTFLEET_TEST_PG and PGTEST_DIR
#   go test ./internal/inventory/postgres/
#   scripts/pg-test.sh stop "$PGTEST_DIR"
#
# Installs Debian's postgresql when missing (needs root). The cluster lives in
# a temp dir, listens on 127.0.0.1 only (port 5433, or the next free one) and
# runs with fsync off: it holds test data only. Status goes to stderr; stdout
# is only the KEY=value lines, safe to eval.
set -euo pipefail

cmd=${1:-start}

pgbin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] || return 1
  echo "$d"
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
start)
  if ! bin=$(pgbin) || ! command -v runuser >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
      echo "pg-test: PostgreSQL is not installed; run as root or: apt-get install postgresql" >&2
      exit 1
    fi
    echo "pg-test: installing postgresql from Debian" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends postgresql >&2 ||
      { apt-get -o DPkg::Lock::Timeout=900 update -q >&2 &&
        apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends postgresql >&2; }
    bin=$(pgbin)
  fi
  # The Debian package starts its own cluster on 5432; ours is separate.
  port=${PGTEST_PORT:-5433}
  for _ in $(seq 1 20); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
    port=$((port + 1))
  done
  dir=$(mktemp -d /tmp/bf-pgtest.XXXXXX)
  chmod 700 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
  pw=bootfleet-test
  as_pg sh -c "echo $pw > '$dir/pw'"
  as_pg "$bin/initdb" -D "$dir/data" -U postgres -E UTF8 --no-sync \
    --auth-local=trust --auth-host=scram-sha-256 --pwfile="$dir/pw" >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c max_connections=50" \
    start >&2 || { cat "$dir/server.log" >&2; exit 1; }
  as_pg "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE bootfleet LOGIN PASSWORD '$pw'" \
    -c "CREATE DATABASE bootfleet_test OWNER bootfleet" >&2
  echo "pg-test: PostgreSQL on 127.0.0.1:$port, data in $dir; stop with: $0 stop $dir" >&2
  echo "export BOOTFLEET_TEST_PG='postgres://bootfleet:$pw@127.0.0.1:$port/bootfleet_test?sslmode=disable'"
  echo "export PGTEST_DIR='$dir'"
  ;;
stop)
  dir=${2:?usage: $0 stop DIR}
  case "$dir" in /tmp/bf-pgtest.*) ;; *) echo "pg-test: refusing to remove $dir" >&2; exit 1 ;; esac
  if bin=$(pgbin) && [ -d "$dir/data" ]; then
    as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start | stop DIR" >&2
  exit 2
  ;;
esac
