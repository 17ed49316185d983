#!/usr/bin/env bash
# Measures what telemetry costs: the same downloads from bootfleet with
# `telemetry: on` and `telemetry: off`, alternating rounds so machine noise
# hits both alike, medians compared. Loopback, no shaping: CPU is the only
# limit, which is where recording could show. Writes BENCHMARKS-telemetry.md.
# Usage: scripts/bench-telemetry.sh [ROUNDS]   (run as root from the repo root, after make build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
BIN=bin/bootfleet
OUT=BENCHMARKS-telemetry.md
WORK=$(mktemp -d /dev/shm/bf-telemetry.XXXXXX)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM
command -v atftp >/dev/null || apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends atftp
mkdir -p "$WORK/root" "$WORK/dl"
head -c $((200 << 20)) /dev/urandom > "$WORK/root/http.bin"
head -c $((50 << 20)) /dev/urandom > "$WORK/root/tftp.bin"
HTTP_CMD="curl -s -o $WORK/dl/http.bin http://127.0.0.1:8097/files/http.bin"
TFTP_CMD="atftp --get -r tftp.bin -l $WORK/dl/tftp.bin --option 'blksize 1456' --option 'windowsize 64' 127.0.0.1 6997"

start() { # $1 = on|off
  cat > "$WORK/c-$1.yaml" <<YAML
server_ip: 127.0.0.1
data: $WORK/data-$1
dhcp: {mode: off}
telemetry: $1
tftp: {listen: "127.0.0.1:6997", root: $WORK/root}
http: {listen: "127.0.0.1:8097"}
log: {level: warn}
YAML
  $BIN serve --config "$WORK/c-$1.yaml" 2>"$WORK/log-$1" &
  PID=$!
  for _ in $(seq 50); do curl -sf -o /dev/null http://127.0.0.1:8097/metrics && return; sleep 0.1; done
  echo "bootfleet did not start:"; cat "$WORK/log-$1"; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }
timeit() { local t0 t1; t0=$(date +%s.%N); eval "$1"; t1=$(date +%s.%N); echo "$t0 $t1" | awk '{printf "%.4f\n", $2-$1}'; }
# Nanoseconds on CPU over all the server's threads (schedstat, not tick-sampled).
cpuns() { cat /proc/"$PID"/task/*/schedstat | awk '{s+=$1} END{printf "%d\n", s}'; }
median() { sort -g | awk '{a[NR]=$1} END{print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

for r in $(seq "$ROUNDS"); do
  order="on off"; [ $((r % 2)) -eq 0 ] && order="off on"   # neither mode always goes first
  for mode in $order; do
    start "$mode"
    c0=$(cpuns)
    timeit "$HTTP_CMD" >> "$WORK/http-$mode"
    cmp -s "$WORK/dl/http.bin" "$WORK/root/http.bin" || { echo "HTTP download differs"; exit 1; }
    timeit "$TFTP_CMD" >> "$WORK/tftp-$mode"
    cmp -s "$WORK/dl/tftp.bin" "$WORK/root/tftp.bin" || { echo "TFTP download differs"; exit 1; }
    echo $(( $(cpuns) - c0 )) >> "$WORK/cpu-$mode"
    stop
  done
  echo "round $r/$ROUNDS done"
done

row() { # proto bytes
  local on off
  on=$(median < "$WORK/$1-on"); off=$(median < "$WORK/$1-off")
  awk -v p="$1" -v b="$2" -v on="$on" -v off="$off" 'BEGIN{
    printf "| %s | %.3f s (%.0f MB/s) | %.3f s (%.0f MB/s) | %+.1f%% |\n", p, off, b/off/1e6, on, b/on/1e6, (on-off)/off*100 }'
}
{
  echo "# Telemetry cost"
  echo
  echo "Written by \`scripts/bench-telemetry.sh $ROUNDS\` on $(date -u +%FT%TZ), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "Loopback, no shaping, so CPU is the only limit; $ROUNDS rounds, each running both modes, which goes first alternating; medians."
  echo "Target (issue 6): the difference stays under 2%. A positive difference means telemetry on was slower."
  echo
  echo "| download | telemetry off | telemetry on | on vs off |"
  echo "|---|---:|---:|---:|"
  row http $((200 << 20))
  row tftp $((50 << 20))
  awk -v on="$(median < "$WORK/cpu-on")" -v off="$(median < "$WORK/cpu-off")" -v gb="$(( (250 << 20) ))" 'BEGIN{
    printf "| server CPU per GB served (both downloads) | %.2f s | %.2f s | %+.1f%% |\n", off/1e9/(gb/1e9), on/1e9/(gb/1e9), (off>0)?(on-off)/off*100:0 }'
  echo
  echo "Wall times on a shared 2-core machine move by ±10% between rounds, more than any telemetry effect; server CPU"
  echo "(the sum of /proc/PID/task/*/schedstat run time over bootfleet's threads) is the steadier figure."
  echo "Commands (server: \`bin/bootfleet serve\` with \`telemetry: on|off\`, dhcp off, tftp.root holding random files):"
  echo
  echo "- HTTP, 200 MiB: \`$HTTP_CMD\`" | sed "s|$WORK|\$WORK|g"
  echo "- TFTP, 50 MiB: \`$TFTP_CMD\`" | sed "s|$WORK|\$WORK|g"
  echo
  echo "Raw seconds (on): http $(tr '\n' ' ' < "$WORK/http-on"); tftp $(tr '\n' ' ' < "$WORK/tftp-on")"
  echo
  echo "Raw seconds (off): http $(tr '\n' ' ' < "$WORK/http-off"); tftp $(tr '\n' ' ' < "$WORK/tftp-off")"
} > "$OUT"
cat "$OUT"
