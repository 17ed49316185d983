#!/usr/bin/env bash
# ab-nbd.sh: an A/B of bootfleet builds (or settings) on fio's 4 KiB
# random I/O, interleaved with nbdkit, for trying a change to the NBD path
# before running the whole bench (scripts/bench-nbd.sh, the figures of
# record). Every variant is its own bootfleet server with one persistent
# machine on the same 512 MiB image, its overlay filled first (so no run
# pays for allocating blocks); nbdkit serves a copy of the image. Each
# round runs every server once, starting with a different one, after an
# untimed sync. It prints each server's median and, per variant, the
# median of its IOPS over nbdkit's in the same round, the rounds it won
# and a two-sided sign test (p >= 0.05: not told apart from a tie).
#
# Usage (root, repo root): scripts/ab-nbd.sh NAME=BINARY[,VAR=VALUE...] ...
#   e.g. scripts/ab-nbd.sh head=/tmp/head/bootfleet new=bin/bootfleet
# Env: DIR (default /var/tmp: ext4 here; /dev/shm for tmpfs), ROUNDS
# (default 6), RUNTIME (default 4 s, plus 1 s ramp), RW (default
# randwrite; randread works too). About 6 s per server per round.
set -euo pipefail
[ $# -gt 0 ] || { sed -n '13,17p' "$0" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "ab-nbd.sh: needs root (network namespace)" >&2; exit 1; }
for t in fio nbdkit nbdcopy curl; do
  command -v "$t" >/dev/null || { echo "ab-nbd.sh: $t missing; scripts/bench-nbd.sh installs it" >&2; exit 1; }
done
DIR=${DIR:-/var/tmp}
ROUNDS=${ROUNDS:-6}
RUNTIME=${RUNTIME:-4}
RW=${RW:-randwrite}
NS=bf-ab-$$
W=$(mktemp -d "$DIR/bf-ab.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns delete "$NS" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
in_ns() { ip netns exec "$NS" "$@"; }

head -c $((512 << 20)) /dev/urandom > "$W/disk.img"
cp "$W/disk.img" "$W/kit.img"
echo k > "$W/vmlinuz"
mkdir -p "$W/ipxe"; echo e > "$W/ipxe/ipxe.efi"; echo k > "$W/ipxe/undionly.kpxe"
declare -A URI
NAMES=()
port=11000
for v in "$@"; do
  name=${v%%=*}; rest=${v#*=}; bin=${rest%%,*}; envs=()
  [ "$rest" != "$bin" ] && IFS=, read -r -a envs <<< "${rest#*,}"
  [ -x "$bin" ] || { echo "ab-nbd.sh: $bin (variant $name) is not an executable" >&2; exit 1; }
  d=$W/$name; mkdir -p "$d"
  cat > "$d/bf.yaml" <<YAML
server_ip: 127.0.0.1
data: $d/data
dhcp: {mode: off}
tftp: {listen: "127.0.0.1:0"}
http: {listen: "127.0.0.1:$((port + 1))"}
nbd: {listen: "127.0.0.1:$port"}
ipxe: {dir: $W/ipxe}
log: {level: warn}
profiles:
  rw: {kernel: $W/vmlinuz, root: {image: ab, overlay: persistent}}
machines:
  - {mac: "52:54:00:ab:00:01", name: ab, profile: rw}
YAML
  # Not through in_ns: $! must be the server itself for cleanup to stop it.
  ip netns exec "$NS" env "${envs[@]}" "$bin" serve -c "$d/bf.yaml" 2> "$d/bf.log" &
  PIDS+=("$!")
  for i in $(seq 100); do
    in_ns curl -s -o /dev/null "http://127.0.0.1:$((port + 1))/api/v1/openapi.json" && break
    sleep 0.1
  done
  in_ns "$bin" image import --server "http://127.0.0.1:$((port + 1))" --data "$d/data" ab "$W/disk.img" > "$d/import.log" 2>&1 </dev/null ||
    { echo "ab-nbd.sh: import into $name failed:" >&2; cat "$d/import.log" "$d/bf.log" >&2; exit 1; }
  URI[$name]=$(in_ns curl -s "http://127.0.0.1:$((port + 1))/ipxe/52-54-00-ab-00-01" | grep -o 'bootfleet\.root=nbd:[^ ]*' | awk -F: '{print "nbd://"$2":"$3"/"$4}')
  [ -n "${URI[$name]}" ] || { echo "ab-nbd.sh: no export in $name's boot script" >&2; exit 1; }
  in_ns nbdcopy "$W/disk.img" "${URI[$name]}"
  NAMES+=("$name")
  port=$((port + 10))
done
ip netns exec "$NS" nbdkit -f -i 127.0.0.1 -p "$port" file file="$W/kit.img" 2> "$W/kit.log" &
PIDS+=("$!")
URI[nbdkit]=nbd://127.0.0.1:$port
NAMES+=(nbdkit)
for i in $(seq 50); do in_ns nbdinfo --size "${URI[nbdkit]}" >/dev/null 2>&1 && break; sleep 0.1; done

RES=$W/results
for r in $(seq "$ROUNDS"); do
  n=${#NAMES[@]}
  for i in $(seq 0 $((n - 1))); do
    k=${NAMES[$(((i + r) % n))]}
    sync
    v=$(in_ns fio --ioengine=nbd --bs=4k --iodepth=32 --numjobs=1 --ramp_time=1 --runtime="$RUNTIME" --time_based \
      --output-format=terse --name=ab --uri="${URI[$k]}" --rw="$RW" 2>/dev/null |
      awk -F';' '/^3;/{print ($49 > 0) ? $49 : $8}')
    echo "$r $k ${v:-0}" >> "$RES"
  done
  echo "== round $r/$ROUNDS: $(awk -v r="$r" '$1==r{printf "%s %s  ", $2, $3}' "$RES")"
done
# Medians (the mean of the middle two for an even count), then each
# variant against nbdkit round by round.
for k in "${NAMES[@]}"; do
  awk -v k="$k" '$2==k{print $3}' "$RES" | sort -n |
    awk -v k="$k" '{a[NR]=$1} END{printf "%-10s median %7d IOPS  runs:", k, (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; for (i=1; i<=NR; i++) printf " %d", a[i]; print ""}'
done
for k in "${NAMES[@]}"; do
  [ "$k" = nbdkit ] && continue
  awk -v k="$k" '$2==k{a[$1]=$3} $2=="nbdkit"{b[$1]=$3} END{for (r in a) if (r in b) print a[r], b[r]}' "$RES" |
    awk -f "$(dirname "$0")/pairs.awk" |
    awk -v k="$k" '{printf "%-10s over nbdkit, round by round: median %.3f, ahead in %d of %d (sign test p = %.2f)\n", k, $1, $2, $3, $4}'
done
