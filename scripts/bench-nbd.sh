#!/usr/bin/env bash
# bench-nbd.sh: bootfleet's NBD server (issue 5) beside qemu-nbd, nbdkit's
# file plugin and nbd-server, all serving the same 512 MiB image on tmpfs,
# side by side in one run. Writes BENCHMARKS-nbd.md.
#
# Cases: sequential read of the whole export (nbdcopy, MB/s); 4 KiB random
# read and 4 KiB random write (fio's nbd engine, one connection, queue depth
# 32, IOPS). bootfleet is measured with overlay: none (the read-only base)
# and overlay: persistent (writes go to the machine's copy-on-write overlay).
# Each figure is the median of ROUNDS runs; every round runs every server,
# starting with a different one each round, so machine noise hits all alike.
#
# Everything runs on the loopback of a private network namespace, and every
# file (image, bootfleet's data directory, overlays) is on /dev/shm: there
# is no link and no disk limit, so CPU is the only one. The ceilings printed
# beside the figures are the same operations on the local file without NBD.
#
# One more case, concurrent readers: 1, 10 and 50 clients read a 128 MiB
# image at once (nbdcopy, one connection each; bootfleet: one machine each,
# overlay ephemeral as in a lab), from a file on the real disk whose page
# cache is dropped before each run. It reports the aggregate MB/s and the
# bytes the disk read, which must not grow with the reader count. And 4 KiB
# random write again with the files on the disk (ext4 here), where
# persistent overlays usually live (CASES word: diskwrites), and once more
# right after each server read its whole export from a cold page cache, as
# a client that reads its disk and then writes (CASES word: diskrereads).
#
# Usage: scripts/bench-nbd.sh   (root, repo root, after `make build`)
# Env: ROUNDS (default 9: the fio runs are client-bound and swing by 30%
# between runs, and a sign test over 5 rounds cannot call any edge), RUNTIME seconds per fio run (default 4, plus 1 s ramp);
# READER_ROUNDS for the concurrent-readers case (default 9: its runs are
# short and their cold reads swing the most); SHORT_REPEAT (default 3): the
# runs that last well under a second (sequential read, one reader) run this
# many times per round, each time in a new server order;
# CASES (default "reads writes diskwrites diskrereads readers") and OUT (default BENCHMARKS-nbd.md)
# to run some cases only, e.g. CASES=readers OUT=/tmp/readers.md; the cases
# left out show as failed in that report.
# A full run takes about 23 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-9}
RUNTIME=${RUNTIME:-4}
BIN=$PWD/bin/bootfleet
OUT=${OUT:-BENCHMARKS-nbd.md}
CASES=${CASES:-reads writes diskwrites diskrereads readers}
READER_ROUNDS=${READER_ROUNDS:-9}
SHORT_REPEAT=${SHORT_REPEAT:-3}
IMG_MIB=512

# Outer half: check, install, make the namespace, run the inner half in it.
if [ -z "${BF_NBDBENCH_NS:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "bench-nbd.sh: needs root (network namespace)" >&2; exit 1; }
  [ -x "$BIN" ] || { echo "bench-nbd.sh: $BIN missing; run make build (make bench does)" >&2; exit 1; }
  missing=""
  for p in nbd-server nbdkit fio qemu-utils libnbd-bin; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    # Bench-only: kept out of scripts/deps.sh so make test does not need them.
    apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends nbd-server nbdkit fio qemu-utils libnbd-bin
  fi
  fio --enghelp 2>/dev/null | grep -qw nbd || { echo "bench-nbd.sh: this fio has no nbd engine" >&2; exit 1; }
  NS=bf-nbdbench-$$
  ip netns add "$NS"
  trap 'ip netns delete "$NS" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
  ip netns exec "$NS" ip link set lo up
  # The version is taken before the report rewrites OUT, which made a
  # clean tree look dirty when OUT is the tracked BENCHMARKS-nbd.md.
  BF_NBDBENCH_NS=$NS LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)" BF_VERSION="$(git describe --always --dirty 2>/dev/null || echo '?')" ip netns exec "$NS" "$PWD/scripts/bench-nbd.sh" "$@"
  exit
fi

# Inner half, inside the namespace: fixed ports cannot clash with anyone.
WORK=$(mktemp -d /dev/shm/bf-nbdbench.XXXXXX)
IMG=$WORK/disk.img
PIDS=()
NBDS_PID=""
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$NBDS_PID" ]; then
    for p in $(pgrep -P "$NBDS_PID" || true); do kill "$p" 2>/dev/null || true; done
    kill "$NBDS_PID" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  rm -rf "$WORK" "${DISK:-}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

declare -A URI PID NAME CMD SRVCMD
TICK=$(getconf CLK_TCK)

# up waits until an export answers with the image's size.
up() { # key [MiB]
  local i
  for i in $(seq 100); do
    [ "$(nbdinfo --size "${URI[$1]}" 2>/dev/null)" = $((${2:-$IMG_MIB} << 20)) ] && return 0
    sleep 0.1
  done
  echo "bench-nbd.sh: ${NAME[$1]} does not serve ${URI[$1]} within 10 s" >&2
  [ -f "$WORK/$1.log" ] && cat "$WORK/$1.log" >&2
  exit 1
}

echo "== image: $IMG_MIB MiB of random data on /dev/shm"
head -c $((IMG_MIB << 20)) /dev/urandom > "$IMG"
# The concurrent-readers case reads from the real disk.
DISK=$(mktemp -d /var/tmp/bf-nbdbench.XXXXXX)
SMALL=$DISK/small.img
SMALL_MIB=128
head -c $((SMALL_MIB << 20)) /dev/urandom > "$SMALL"
DEV=$(basename "$(df --output=source "$DISK" | tail -1)")
[ -r "/sys/class/block/$DEV/stat" ] || { echo "bench-nbd.sh: no block statistics for $DEV (the disk under $DISK)" >&2; exit 1; }

# bootfleet: one server, two machines whose profiles root the same image
# with overlay none and persistent. telemetry and the rest stay at their
# defaults; log level warn, as a busy server would run.
echo kernel > "$WORK/vmlinuz"
mkdir -p "$WORK/ipxe"
# Stand-ins: only scripts are fetched here, no firmware boots.
echo efi > "$WORK/ipxe/ipxe.efi"; echo kpxe > "$WORK/ipxe/undionly.kpxe"
cat > "$WORK/bootfleet.yaml" <<YAML
server_ip: 127.0.0.1
data: $WORK/data
dhcp: {mode: off}
tftp: {listen: "127.0.0.1:0"}
http: {listen: "127.0.0.1:8080"}
nbd: {listen: "127.0.0.1:10809"}
ipxe: {dir: $WORK/ipxe}
log: {level: warn}
profiles:
  ro: {kernel: $WORK/vmlinuz, root: {image: bench, overlay: none}}
  rw: {kernel: $WORK/vmlinuz, root: {image: bench, overlay: persistent}}
machines:
  - {mac: "52:54:00:bf:00:01", name: bench-none, profile: ro}
  - {mac: "52:54:00:bf:00:02", name: bench-persistent, profile: rw}
YAML
# start_bf: serve config in the background, wait for its API on port, and
# import image file as name; sets LAST_PID.
start_bf() { # config log port data name file
  local i pid
  "$BIN" serve -c "$1" 2> "$2" &
  pid=$!; PIDS+=("$pid"); LAST_PID=$pid
  for i in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$3/api/v1/openapi.json" && break
    kill -0 "$pid" 2>/dev/null || { echo "bench-nbd.sh: bootfleet serve -c $1 exited:" >&2; cat "$2" >&2; exit 1; }
    sleep 0.1
  done
  "$BIN" image import --server "http://127.0.0.1:$3" --data "$4" "$5" "$6" > "$2.import" 2>&1 </dev/null ||
    { echo "bench-nbd.sh: bootfleet image import failed:" >&2; cat "$2.import" "$2" >&2; exit 1; }
}
start_bf "$WORK/bootfleet.yaml" "$WORK/bf.log" 8080 "$WORK/data" bench "$IMG"
BF=$LAST_PID
export_of() { # mac: the export the machine's boot script names
  curl -s "http://127.0.0.1:8080/ipxe/$1" | grep -o 'bootfleet\.root=nbd:[^ ]*' | awk -F: '{print "nbd://"$2":"$3"/"$4}'
}
# A second bootfleet with its data directory on the disk and one machine
# per concurrent reader.
READERS_MAX=50
{
  sed -e "s|^data: .*|data: $DISK/data|" -e 's|127.0.0.1:8080|127.0.0.1:8081|' -e 's|127.0.0.1:10809|127.0.0.1:10819|' \
    -e '/^profiles:/,$d' "$WORK/bootfleet.yaml"
  echo "profiles:"
  echo "  lab: {kernel: $WORK/vmlinuz, root: {image: small, overlay: ephemeral}}"
  echo "  rw: {kernel: $WORK/vmlinuz, root: {image: bench, overlay: persistent}}"
  echo "machines:"
  echo '  - {mac: "52:54:00:bf:00:03", name: bench-disk, profile: rw}'
  for i in $(seq "$READERS_MAX"); do printf '  - {mac: "52:54:00:bf:01:%02x", name: lab-%02d, profile: lab}\n' "$i" "$i"; done
} > "$WORK/bootfleet-disk.yaml"
start_bf "$WORK/bootfleet-disk.yaml" "$WORK/bf2.log" 8081 "$DISK/data" small "$SMALL"
BF2=$LAST_PID
# The disk-write case: the big image on the disk too, as bootfleet's
# second image and as the file the peers write.
DIMG=$DISK/disk.img
cp "$IMG" "$DIMG"
"$BIN" image import --server http://127.0.0.1:8081 --data "$DISK/data" bench "$DIMG" >> "$WORK/bf2.log.import" 2>&1 </dev/null ||
  { echo "bench-nbd.sh: bootfleet image import of the disk copy failed:" >&2; cat "$WORK/bf2.log.import" >&2; exit 1; }
BLOB=$(find "$DISK/data" -type f -size "$((SMALL_MIB << 10))k" | head -1)
[ -n "$BLOB" ] || { echo "bench-nbd.sh: cannot find bootfleet's stored copy of the small image" >&2; exit 1; }
# Every server of the readers case reads this one file: bootfleet's stored
# copy, which the peers serve read-only. On this VM a cold read costs
# several times more when the disk's host has not read the file lately;
# with a file per server, bootfleet alone read its own and paid that alone.
cmp -s "$BLOB" "$SMALL" || { echo "bench-nbd.sh: bootfleet's stored copy $BLOB differs from the small image" >&2; exit 1; }
rm -f "$SMALL"
SMALL=$BLOB
SRVCMD[bf]="bin/bootfleet serve -c bootfleet.yaml (nbd.listen 127.0.0.1:10809, log.level warn) + bin/bootfleet image import bench disk.img; export from GET /ipxe/{mac}. On the disk: a second one, bootfleet-disk.yaml (data on /var/tmp, nbd.listen 127.0.0.1:10819)"
NAME[bf-none]="bootfleet, overlay: none";             URI[bf-none]=$(export_of 52-54-00-bf-00-01);       PID[bf-none]=$BF
NAME[bf-pers]="bootfleet, overlay: persistent";       URI[bf-pers]=$(export_of 52-54-00-bf-00-02);       PID[bf-pers]=$BF
NAME[bf-disk]="bootfleet, overlay: persistent";       PID[bf-disk]=$BF2
URI[bf-disk]=$(curl -s "http://127.0.0.1:8081/ipxe/52-54-00-bf-00-03" | grep -o 'bootfleet\.root=nbd:[^ ]*' | awk -F: '{print "nbd://"$2":"$3"/"$4}')

# Peers serve $IMG itself: the read-only instance for the read cases, the
# writable one for the write case, each with its packaged defaults.
# qemu-nbd takes an image lock; the read-only instance opts out of it so
# both can open the file.
QRO="qemu-nbd --image-opts -r -t -e 0 -b 127.0.0.1 -p 10811 -x disk driver=raw,file.driver=file,file.filename=$IMG,file.locking=off"
QRW="qemu-nbd -f raw -t -e 0 -b 127.0.0.1 -p 10812 -x disk $IMG"
$QRO 2> "$WORK/qemu-ro.log" & PID[qemu-ro]=$!; PIDS+=("$!")
$QRW 2> "$WORK/qemu-rw.log" & PID[qemu-rw]=$!; PIDS+=("$!")
KRO="nbdkit -f -r -i 127.0.0.1 -p 10813 file file=$IMG"
KRW="nbdkit -f -i 127.0.0.1 -p 10814 file file=$IMG"
$KRO 2> "$WORK/kit-ro.log" & PID[kit-ro]=$!; PIDS+=("$!")
$KRW 2> "$WORK/kit-rw.log" & PID[kit-rw]=$!; PIDS+=("$!")
QSM="qemu-nbd --image-opts -r -t -e 0 -b 127.0.0.1 -p 10821 -x disk driver=raw,file.driver=file,file.filename=$SMALL,file.locking=off"
KSM="nbdkit -f -r -i 127.0.0.1 -p 10823 file file=$SMALL"
$QSM 2> "$WORK/qemu-sm.log" & PID[qemu-sm]=$!; PIDS+=("$!")
$KSM 2> "$WORK/kit-sm.log" & PID[kit-sm]=$!; PIDS+=("$!")
QRWD="qemu-nbd -f raw -t -e 0 -b 127.0.0.1 -p 10832 -x disk $DIMG"
KRWD="nbdkit -f -i 127.0.0.1 -p 10834 file file=$DIMG"
$QRWD 2> "$WORK/qemu-rwd.log" & PID[qemu-rwd]=$!; PIDS+=("$!")
$KRWD 2> "$WORK/kit-rwd.log" & PID[kit-rwd]=$!; PIDS+=("$!")
# nbd-server forks a child per connection (-d would serve one client only),
# so it runs as the daemon it is and is found by its pid file.
cat > "$WORK/nbd-server.conf" <<CONF
[generic]
    listenaddr = 127.0.0.1
    port = 10815
[ro]
    exportname = $IMG
    readonly = true
[rw]
    exportname = $IMG
[small]
    exportname = $SMALL
    readonly = true
[rwdisk]
    exportname = $DIMG
CONF
nbd-server -C "$WORK/nbd-server.conf" -p "$WORK/nbd-server.pid" 2> "$WORK/nbds.log"
for i in $(seq 50); do [ -s "$WORK/nbd-server.pid" ] && break; sleep 0.1; done
NBDS_PID=$(cat "$WORK/nbd-server.pid")
PID[nbds-ro]=$NBDS_PID; PID[nbds-rw]=$NBDS_PID
SRVCMD[qemu]="$QRO ; $QRW ; $QSM ; $QRWD"
SRVCMD[kit]="$KRO ; $KRW ; $KSM ; $KRWD"
SRVCMD[nbds]="nbd-server -C nbd-server.conf (port 10815; export ro: readonly = true, exports rw and rwdisk: read-write; other options default)"
NAME[qemu-ro]="qemu-nbd";    URI[qemu-ro]=nbd://127.0.0.1:10811/disk
NAME[qemu-rw]="qemu-nbd";    URI[qemu-rw]=nbd://127.0.0.1:10812/disk
NAME[kit-ro]="nbdkit file";  URI[kit-ro]=nbd://127.0.0.1:10813
NAME[kit-rw]="nbdkit file";  URI[kit-rw]=nbd://127.0.0.1:10814
NAME[nbds-ro]="nbd-server";  URI[nbds-ro]=nbd://127.0.0.1:10815/ro
NAME[nbds-rw]="nbd-server";  URI[nbds-rw]=nbd://127.0.0.1:10815/rw
NAME[bf-sm]="bootfleet, overlay: ephemeral"; PID[bf-sm]=$BF2
NAME[qemu-sm]="qemu-nbd";    URI[qemu-sm]=nbd://127.0.0.1:10821/disk
NAME[kit-sm]="nbdkit file";  URI[kit-sm]=nbd://127.0.0.1:10823
NAME[nbds-sm]="nbd-server";  URI[nbds-sm]=nbd://127.0.0.1:10815/small; PID[nbds-sm]=$NBDS_PID
NAME[qemu-rwd]="qemu-nbd";   URI[qemu-rwd]=nbd://127.0.0.1:10832/disk
NAME[kit-rwd]="nbdkit file"; URI[kit-rwd]=nbd://127.0.0.1:10834
NAME[nbds-rwd]="nbd-server"; URI[nbds-rwd]=nbd://127.0.0.1:10815/rwdisk; PID[nbds-rwd]=$NBDS_PID
# bootfleet's readers are machines, each with its own export.
declare -a BFURI
for i in $(seq "$READERS_MAX"); do
  BFURI[$i]=$(curl -s "http://127.0.0.1:8081/ipxe/52-54-00-bf-01-$(printf %02x "$i")" | grep -o 'bootfleet\.root=nbd:[^ ]*' | awk -F: '{print "nbd://"$2":"$3"/"$4}')
  [ -n "${BFURI[$i]}" ] || { echo "bench-nbd.sh: no export in machine $i's boot script" >&2; exit 1; }
done
URI[bf-sm]=${BFURI[1]}
SMALLS="bf-sm qemu-sm kit-sm nbds-sm"
READERS="bf-none bf-pers qemu-ro kit-ro nbds-ro"
WRITERS="bf-pers qemu-rw kit-rw nbds-rw"
DWRITERS="bf-disk qemu-rwd kit-rwd nbds-rwd"
declare -A MULTI
for k in $READERS $WRITERS $DWRITERS; do
  up "$k"
  MULTI[$k]=$(nbdinfo "${URI[$k]}" | awk '/can_multi_conn:/{print $2}')
done

# Every read-only export must hold the image, byte for byte (also warms
# every server's page cache path alike).
for k in $READERS; do
  nbdcopy "${URI[$k]}" - | cmp -s - "$IMG" || { echo "bench-nbd.sh: ${NAME[$k]} serves other bytes than the image" >&2; exit 1; }
done
for k in $SMALLS; do
  up "$k" "$SMALL_MIB"
  nbdcopy "${URI[$k]}" - | cmp -s - "$SMALL" || { echo "bench-nbd.sh: ${NAME[$k]} serves other bytes than the small image" >&2; exit 1; }
done
for i in $(seq "$READERS_MAX"); do
  [ "$(nbdinfo --size "${BFURI[$i]}")" = $((SMALL_MIB << 20)) ] || { echo "bench-nbd.sh: machine $i's export does not answer" >&2; exit 1; }
done
echo "== all exports serve the image"

# ticks: CPU time of a server in clock ticks, its reaped children included
# (nbd-server's per-connection children count once they exit).
ticks() { awk '{sub(/.*\) /, ""); print $12+$13+$14+$15}' "/proc/$1/stat"; }
# settle waits until nbd-server has reaped the children of the last run.
settle() { local i; for i in $(seq 40); do [ -z "$(pgrep -P "$NBDS_PID" || true)" ] && return; sleep 0.05; done; }

FIO="fio --ioengine=nbd --bs=4k --iodepth=32 --numjobs=1 --ramp_time=1 --runtime=$RUNTIME --time_based --output-format=terse"
LFIO="fio --ioengine=psync --bs=4k --numjobs=1 --ramp_time=1 --runtime=$RUNTIME --time_based --output-format=terse --filename=$IMG"
DFIO="fio --ioengine=psync --bs=4k --numjobs=1 --ramp_time=1 --runtime=$RUNTIME --time_based --output-format=terse --filename=$DIMG"
command_for() { # case key
  case $1/$2 in
    seq/ceil)      echo "dd if=$IMG of=/dev/null bs=1M" ;;
    seq/ceil2)     echo "nbdcopy $IMG null:" ;;
    seq/*)         echo "nbdcopy ${URI[$2]} null:" ;;
    rr*/ceil)      echo "$LFIO --name=rr --rw=randread" ;;
    rw/ceil)       echo "$LFIO --name=rw --rw=randwrite" ;;
    rwd/ceil)      echo "$DFIO --name=rw --rw=randwrite" ;;
    rr*/*)         echo "$FIO --name=rr --uri=${URI[$2]} --rw=randread" ;;
    rw*/*)         echo "$FIO --name=rw --uri=${URI[$2]} --rw=randwrite" ;;
  esac
}
RES=$WORK/results; : > "$RES"
# clientcpu: user+system seconds of this shell's reaped children, which are
# the clients (fio, nbdcopy) once a run has ended; the servers are never
# reaped before the end, so they do not count.
# It sets CLIENTCPU: times must run in this shell, not in a subshell.
clientcpu() {
  times > "$WORK/times"
  CLIENTCPU=$(awk 'NR==2{split($1,u,"m"); split($2,s,"m"); printf "%.3f", u[1]*60+u[2]+s[1]*60+s[2]}' "$WORK/times")
}
run() { # case key round: appends "case key round value cpu_ticks client_cpu_s" to $RES
  local c=$1 k=$2 r=$3 cmd v t0 t1 c0=0 c1=0 out k0 k1
  cmd=$(command_for "$c" "$k"); CMD[$c/$k]=$cmd
  [ -n "${PID[$k]:-}" ] && c0=$(ticks "${PID[$k]}")
  clientcpu; k0=$CLIENTCPU
  case $c in
    seq)
      t0=$(date +%s.%N)
      if eval "$cmd" > /dev/null 2> "$WORK/stderr"; then
        t1=$(date +%s.%N); v=$(awk -v a="$t0" -v b="$t1" -v n=$((IMG_MIB << 20)) 'BEGIN{printf "%.1f", n/(b-a)/1e6}')
      else v=nan; fi ;;
    *)
      out=$(eval "$cmd" 2> "$WORK/stderr" || true)
      v=$(echo "$out" | awk -F';' -v f="$([ "${c#rw}" != "$c" ] && echo 49 || echo 8)" '/^3;/{ if ($5 != 0 || $f == 0) print "nan"; else print $f; n++ } END{ if (!n) print "nan" }') ;;
  esac
  if [ "$v" = nan ]; then
    { echo "$c ${NAME[$k]:-$k} failed (round $r): $cmd"; tail -3 "$WORK/stderr"; } | tee -a "$WORK/errors" >&2
  fi
  clientcpu; k1=$CLIENTCPU
  if [ -n "${PID[$k]:-}" ]; then [ "$k" = "${k#nbds}" ] || settle; c1=$(ticks "${PID[$k]}"); fi
  echo "$c $k $r $v $((c1 - c0)) $(awk -v a="$k0" -v b="$k1" 'BEGIN{print b-a}')" >> "$RES"
}
rotate() { # n words...: the words, starting at the n-th (mod count)
  local n=$1; shift; local a=("$@"); local i
  for i in $(seq 0 $(($# - 1))); do echo -n "${a[$(((i + n) % $#))]} "; done
}
NAME[ceil]="ceiling"; NAME[ceil2]="ceiling"

# readers: n clients read the whole small image at once, one connection
# each, starting from a cold page cache for the served file. Appends
# "readersN key round MB/s cpu_ticks disk_MiB" to $RES.
sectors() { awk '{print $3}' "/sys/class/block/$DEV/stat"; }
# drop takes a file's pages out of the page cache: its next read is cold.
drop() { sync "$1"; dd if="$1" iflag=nocache count=0 status=none; }
# The ceiling (key ceil-sm) is n local readers of the file without NBD: dd.
readers() { # key n round
  local k=$1 n=$2 r=$3 f=$SMALL i uri t0 t1 s0 s1 c0=0 c1=0 k0 k1 fails=0 pids=()
  drop "$f"
  s0=$(sectors); [ -n "${PID[$k]:-}" ] && c0=$(ticks "${PID[$k]}"); clientcpu; k0=$CLIENTCPU; t0=$(date +%s.%N)
  for i in $(seq "$n"); do
    uri=${URI[$k]:-}; [ "$k" = bf-sm ] && uri=${BFURI[$i]}
    if [ "$k" = ceil-sm ]; then
      dd if="$f" of=/dev/null bs=256k status=none 2>> "$WORK/stderr" & pids+=("$!")
    else
      nbdcopy --connections=1 "$uri" null: 2>> "$WORK/stderr" & pids+=("$!")
    fi
  done
  for i in "${pids[@]}"; do wait "$i" || fails=$((fails + 1)); done
  t1=$(date +%s.%N)
  [ "$k" = "${k#nbds}" ] || settle
  s1=$(sectors); [ -n "${PID[$k]:-}" ] && c1=$(ticks "${PID[$k]}"); clientcpu; k1=$CLIENTCPU
  case $k in
    ceil-sm) CMD[readers/$k]="$n x dd if=$f of=/dev/null bs=256k (at once)" ;;
    bf-sm)   CMD[readers/$k]="$n x nbdcopy --connections=1 nbd://127.0.0.1:10819/<machine i's export> null: (at once)" ;;
    *)       CMD[readers/$k]="$n x nbdcopy --connections=1 ${URI[$k]} null: (at once)" ;;
  esac
  if [ "$fails" -gt 0 ]; then
    echo "readers$n ${NAME[$k]} failed (round $r): $fails of $n readers" | tee -a "$WORK/errors" >&2
    echo "readers$n $k $r nan 0 0 0" >> "$RES"; return
  fi
  awk -v c="readers$n" -v k="$k" -v r="$r" -v n="$n" -v b=$((SMALL_MIB << 20)) -v a="$t0" -v z="$t1" -v t=$((c1 - c0)) -v d=$((s1 - s0)) \
    -v k0="$k0" -v k1="$k1" 'BEGIN{printf "%s %s %s %.1f %d %.1f %.3f\n", c, k, r, n*b/(z-a)/1e6, t, d*512/1048576, k1-k0}' >> "$RES"
}
READER_COUNTS="1 10 $READERS_MAX"
# warmup is an untimed cold read of the file. In an ad hoc run the first
# cold read after a burst of 50 readers got about 0.7 of the speed of the
# one after it, for whichever server came first (nbdkit as well as
# bootfleet); this VM does not show why (it hands memory the clients freed
# back to its host, and its disk is a file on that host).
warmup() {
  drop "$SMALL"
  dd if="$SMALL" of=/dev/null bs=256k status=none
}

# Phase 1, reads, with bootfleet's persistent overlay still empty (reads
# fall through to the base). Phase 2, writes; after them, reads of the
# persistent export again, now served from the filled overlay.
T0=$(date +%s)
has() { case " $CASES " in *" $1 "*) return 0 ;; esac; return 1; }
# A run that lasts a fraction of a second is repeated within its round
# (round r, repetition i is "r.i"), so one slow moment of the machine
# counts once among many.
has reads && for r in $(seq "$ROUNDS"); do
  for i in $(seq "$SHORT_REPEAT"); do
    for k in $(rotate $((r * SHORT_REPEAT + i)) $READERS ceil ceil2); do run seq "$k" "$r.$i"; done
  done
  for k in $(rotate "$r" $READERS ceil); do run rr "$k" "$r"; done
  echo "== reads, round $r/$ROUNDS done ($(( $(date +%s) - T0 )) s)"
done
has writes && for r in $(seq "$ROUNDS"); do
  for k in $(rotate "$r" $WRITERS ceil); do run rw "$k" "$r"; done
  run rr-ovl bf-pers "$r"
  echo "== writes, round $r/$ROUNDS done ($(( $(date +%s) - T0 )) s)"
done
# Each run starts with no dirty pages left by the one before it (sync,
# untimed), so no server's run pays for another's write-back.
has diskwrites && for r in $(seq "$ROUNDS"); do
  for k in $(rotate "$r" $DWRITERS ceil); do sync; run rwd "$k" "$r"; done
  echo "== disk writes, round $r/$ROUNDS done ($(( $(date +%s) - T0 )) s)"
done
# The same writes right after the server read its whole export (nbdcopy,
# untimed) from a cold page cache: the folios that reading leaves in the
# page cache are the ones the writes then land in. bootfleet's overlay is
# filled first when the case before did not fill it.
has diskrereads && ! has diskwrites && nbdcopy "$DIMG" "${URI[bf-disk]}"
files_of() { # key -> the files a server reads and writes for the disk cases
  case $1 in
    bf-disk) find "$DISK/data/overlays" -path '*52-54-00-bf-00-03*' -type f; find "$DISK/data/images" -type f -size "$((IMG_MIB << 10))k" ;;
    *) echo "$DIMG" ;;
  esac
}
has diskrereads && for r in $(seq "$ROUNDS"); do
  for k in $(rotate "$r" $DWRITERS); do
    sync
    for f in $(files_of "$k"); do drop "$f"; done
    nbdcopy "${URI[$k]}" null: 2>> "$WORK/stderr" || echo "bench-nbd.sh: the read before ${NAME[$k]}'s writes failed" >&2
    [ "$k" = "${k#nbds}" ] || settle
    run rwd-read "$k" "$r"
  done
  echo "== writes after a read, round $r/$ROUNDS done ($(( $(date +%s) - T0 )) s)"
done
has readers && for r in $(seq "$READER_ROUNDS"); do
  for n in $READER_COUNTS; do
    warmup
    reps=1; [ "$n" = 1 ] && reps=$SHORT_REPEAT
    for i in $(seq "$reps"); do
      for k in $(rotate $((r * reps + i)) $SMALLS ceil-sm); do readers "$k" "$n" "$r.$i"; done
    done
  done
  echo "== concurrent readers, round $r/$READER_ROUNDS done ($(( $(date +%s) - T0 )) s)"
done
ELAPSED=$(( $(date +%s) - T0 ))
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
if [ -s "$WORK/bf.log" ]; then echo "== bootfleet logged (warn and above):"; head -20 "$WORK/bf.log"; fi
if [ -s "$WORK/bf2.log" ]; then echo "== second bootfleet logged (warn and above):"; head -20 "$WORK/bf2.log"; fi

# ---- report ----
median() { # case key -> median value (nan if no run succeeded)
  awk -v c="$1" -v k="$2" '$1==c && $2==k && $4!="nan"{print $4}' "$RES" | sort -g |
    awk '{a[NR]=$1} END{ if (!NR) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2 }'
}
runs() { awk -v c="$1" -v k="$2" '$1==c && $2==k{printf "%s%s", s, ($4=="nan" ? "failed" : sprintf("%.0f", $4)); s=", "}' "$RES"; }
cpu() { # case key -> median server CPU seconds per run
  awk -v c="$1" -v k="$2" -v t="$TICK" '$1==c && $2==k && $4!="nan"{print $5/t}' "$RES" | sort -g |
    awk '{a[NR]=$1} END{ if (!NR) print "nan"; else print a[int((NR+1)/2)] }'
}
clicpu() { # case key column -> median client CPU seconds per run
  awk -v c="$1" -v k="$2" -v f="$3" '$1==c && $2==k && $4!="nan"{print $f}' "$RES" | sort -g |
    awk '{a[NR]=$1} END{ if (!NR) print "nan"; else print a[int((NR+1)/2)] }'
}
best_peer() { # case keys... -> "value key name"
  local c=$1 k v best=0 bk=- who=""; shift
  for k in "$@"; do
    case $k in bf-*) continue ;; esac
    v=$(median "$c" "$k")
    [ "$v" != nan ] && awk -v a="$v" -v b="$best" 'BEGIN{exit !(a>b)}' && { best=$v; bk=$k; who=${NAME[$k]}; }
  done
  echo "$best $bk $who"
}
# versus: key against peer round by round (scripts/pairs.awk): the median
# of key's figure over peer's in the same round, the rounds key won of
# those where both worked, and the sign test's p for that count. Runs of
# one round are seconds apart, so the ratio moves less with the machine's
# load than the ratio of the two medians.
versus() { # case key peer -> "ratio wins n p" (ratio nan without a round where both worked)
  awk -v c="$1" -v k="$2" -v p="$3" '$1==c && $4!="nan" && $2==k{a[$3]=$4} $1==c && $4!="nan" && $2==p{b[$3]=$4}
    END{for (r in a) if (r in b) print a[r], b[r]}' "$RES" | awk -f scripts/pairs.awk
}
show() { awk -v v="$1" -v u="$2" 'BEGIN{ if (v=="nan") print "failed"; else if (u=="MB/s") printf "%.0f MB/s", v; else printf "%.0f IOPS", v }'; }
# A table for one case: server, median, the ceiling beside it, share of the
# best peer, server CPU per unit of work, the runs, the exact command.
table() { # case unit ceiling-key keys...
  local c=$1 u=$2 ck=$3 k m bp bv ceil cm; shift 3
  read -r bv _ <<< "$(best_peer "$c" "$@")"
  ceil=$(median "${c%-*}" "$ck") # rr-ovl and rwd-read share the ceilings of rr and rwd
  echo "| server | median | ceiling (no NBD) | vs best peer | server CPU | client CPU | runs | command |"
  echo "|---|---:|---:|---:|---:|---:|---|---|"
  for k in "$@"; do
    m=$(median "$c" "$k"); cm=$(cpu "$c" "$k")
    awk -v n="${NAME[$k]}" -v m="$m" -v f="$(show "$m" "$u")" -v cf="$(show "$ceil" "$u")" -v bv="$bv" -v cm="$cm" -v u="$u" \
        -v kc="$(clicpu "$c" "$k" 6)" -v rt="$RUNTIME" -v mib="$IMG_MIB" -v runs="$(runs "$c" "$k")" -v cmd="${CMD[$c/$k]:-}" 'BEGIN{
      vs = (m=="nan" || bv==0) ? "-" : sprintf("%.0f%%", m/bv*100)
      # CPU per unit: seconds per GB moved, or microseconds per 4 KiB op.
      # The client also gets its share of one CPU over the fio run (the
      # 1 s ramp included): fio is one thread, so near 100% it is the limit.
      cpu = kcpu = "-"
      if (cm!="nan" && m!="nan") cpu = (u=="MB/s") ? sprintf("%.2f s/GB", cm/(mib*1048576/1e9)) : sprintf("%.1f us/op", cm*1e6/(m*(rt+1)))
      if (kc!="nan" && m!="nan") kcpu = (u=="MB/s") ? sprintf("%.2f s/GB", kc/(mib*1048576/1e9)) : sprintf("%.1f us/op, %.0f%% of a CPU", kc*1e6/(m*(rt+1)), kc/(rt+1)*100)
      printf "| %s | %s | %s | %s | %s | %s | %s | `%s` |\n", n, f, cf, vs, cpu, kcpu, runs, cmd }'
  done
}
verdict() { # case unit keys...: one line per bootfleet row against the best peer
  local c=$1 u=$2 k m bv bk who; shift 2
  read -r bv bk who <<< "$(best_peer "$c" "$@")"
  for k in "$@"; do
    case $k in bf-*) ;; *) continue ;; esac
    m=$(median "$c" "$k")
    awk -v n="${NAME[$k]}" -v m="$m" -v bv="$bv" -v who="$who" -v f="$(show "$m" "$u")" -v bf="$(show "$bv" "$u")" \
        -v vs="$(versus "$c" "$k" "$bk")" 'BEGIN{
      if (m=="nan") { printf "- %s: failed.\n", n; exit }
      d=(m/bv-1)*100
      printf "- %s: %s against %s (%s): %s by %.0f%%", n, f, who, bf, (d>=0 ? "**ahead**" : "**behind**"), (d<0?-d:d)
      split(vs, w, " ")
      if (w[3] > 0) {
        printf "; round by round, the median ratio is %.0f%%; ahead in %d of %d paired runs", w[1]*100, w[2], w[3]
        if (w[4] >= 0.05) printf " (sign test p = %.2f: not told apart from a tie)", w[4]
        else printf " (sign test p = %.3f)", w[4]
      }
      printf ".\n" }'
  done
}
disk() { # case key -> median MiB read from the disk
  awk -v c="$1" -v k="$2" '$1==c && $2==k && $4!="nan"{print $6}' "$RES" | sort -g |
    awk '{a[NR]=$1} END{ if (!NR) print "nan"; else printf "%.0f", a[int((NR+1)/2)] }'
}
readers_table() {
  local n k m bv cm cf
  echo "| readers | server | aggregate | ceiling (no NBD) | vs best peer | read from disk | server CPU | client CPU | runs |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---|"
  for n in $READER_COUNTS; do
    read -r bv _ <<< "$(best_peer "readers$n" $SMALLS)"
    cf=$(show "$(median "readers$n" ceil-sm)" MB/s)
    for k in $SMALLS; do
      m=$(median "readers$n" "$k"); cm=$(cpu "readers$n" "$k")
      awk -v n="$n" -v s="${NAME[$k]}" -v m="$m" -v f="$(show "$m" MB/s)" -v cf="$cf" -v bv="$bv" -v d="$(disk "readers$n" "$k")" -v cm="$cm" -v kc="$(clicpu "readers$n" "$k" 7)" \
          -v gb="$(awk -v n="$n" -v b=$((SMALL_MIB << 20)) 'BEGIN{print n*b/1e9}')" -v runs="$(runs "readers$n" "$k")" 'BEGIN{
        vs = (m=="nan" || bv==0) ? "-" : sprintf("%.0f%%", m/bv*100)
        cpu = (cm=="nan" || m=="nan") ? "-" : sprintf("%.2f s/GB", cm/gb)
        kcpu = (kc=="nan" || m=="nan") ? "-" : sprintf("%.2f s/GB", kc/gb)
        printf "| %s | %s | %s | %s | %s | %s MiB | %s | %s | %s |\n", n, s, f, cf, vs, d, cpu, kcpu, runs }'
    done
  done
}
sub_work() { sed "s|$WORK|\$WORK|g"; }
{
  echo "# NBD server performance: bootfleet against qemu-nbd, nbdkit and nbd-server"
  echo
  echo "Written by \`scripts/bench-nbd.sh\` (ROUNDS=$ROUNDS, READER_ROUNDS=$READER_ROUNDS, SHORT_REPEAT=$SHORT_REPEAT, RUNTIME=$RUNTIME) on $(date -u +%FT%TZ) in ${ELAPSED} s."
  echo "Machine: $(nproc) CPUs ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), shared with other work;"
  echo "load average before: ${LOAD_BEFORE:-?}, after: $LOAD_AFTER. bootfleet ${BF_VERSION:-?};"
  echo "$(qemu-nbd --version | head -1); $(nbdkit --version); nbd-server $(nbd-server -V 2>&1 | awk '/version/{print $NF; exit}'); $(fio --version); $(nbdcopy --version | head -1)."
  echo
  echo "Issue 5's target: bootfleet ahead of the best peer on every case."
  echo
  echo "## Summary"
  echo
  echo "Sequential read:"; verdict seq MB/s $READERS
  echo; echo "4 KiB random read, queue depth 32:"; verdict rr IOPS $READERS
  echo; echo "4 KiB random write, queue depth 32:"; verdict rw IOPS $WRITERS
  echo; echo "4 KiB random write to the disk (ext4), queue depth 32:"; verdict rwd IOPS $DWRITERS
  echo; echo "4 KiB random write to the disk right after a cold read of the whole export, queue depth 32:"; verdict rwd-read IOPS $DWRITERS
  for n in $READER_COUNTS; do
    echo; echo "$n concurrent readers of one ${SMALL_MIB} MiB image, cold page cache (aggregate):"; verdict "readers$n" MB/s $SMALLS
  done
  echo
  echo "Disk reads with 1, 10, $READERS_MAX readers (MiB, median): $(for k in $SMALLS; do echo -n "${NAME[$k]}: "; for n in $READER_COUNTS; do echo -n "$(disk "readers$n" "$k") "; done; echo -n "; "; done)"
  echo
  echo "## Setup and limits"
  echo
  echo "- One ${IMG_MIB} MiB image of random data on /dev/shm (tmpfs): **no disk limit**. bootfleet serves its imported copy"
  echo "  (same bytes, also on tmpfs, in its data directory; overlays there too); the peers serve the file itself."
  echo "  Every read-only export was compared byte for byte with the image before timing."
  echo "- All traffic on the loopback of a private network namespace: **no link limit**. Client and server share the"
  echo "  same $(nproc) CPUs, so CPU per request is the limit, and a server's CPU use takes CPU from its client."
  echo "- Ceiling column: the same work on the local file without NBD: \`dd\` to /dev/null (memory copy out of tmpfs) for"
  echo "  sequential read, \`fio\` psync on the file for random I/O. The practical ceiling for an NBD server here is the best"
  echo "  peer, which the \"vs best peer\" column compares with."
  echo "- Server CPU: user+system time of the server process (nbd-server: its reaped per-connection children), median,"
  echo "  per GB moved or per 4 KiB operation. A fio run's operations are counted as its IOPS over the ${RUNTIME} s measured plus"
  echo "  the 1 s ramp, which its CPU time covers too (client CPU alike)."
  echo "- Client CPU: user+system time of the client processes (fio, nbdcopy), median, per GB or per operation; for fio"
  echo "  also its share of one CPU over the run. fio's nbd engine is one thread: near 100% of a CPU the client, not the"
  echo "  server, sets the IOPS, and servers that all reach that point can only tie, within the noise."
  echo "- Medians of $ROUNDS runs (sequential read: $((ROUNDS * SHORT_REPEAT)), $SHORT_REPEAT per round, since each lasts a fraction of a"
  echo "  second); each round runs every server, starting with a different one. Reads run first, with"
  echo "  bootfleet's persistent overlay empty, then writes. The fio runs use one connection, 4 KiB, queue depth 32,"
  echo "  1 s ramp then ${RUNTIME} s; nbdcopy uses its defaults (4 connections when the server offers multi-conn, else 1)."
  echo "- Summary lines also give the median over rounds (and repetitions) of bootfleet's figure over the best peer's in the same one:"
  echo "  runs of one round are seconds apart, so that ratio moves less with the machine's load than the medians do."
  echo "  They also count the paired runs bootfleet won, with a two-sided sign test: p is the chance of a count that far"
  echo "  from half if the two servers were equal. Where p >= 0.05 the row cannot be told apart from a tie in this run,"
  echo "  whatever its medians say (with 5 rounds even 5 wins of 5 gives p = 0.06)."
  echo "- Noise: other work shares the CPUs, and the slowest and fastest run of one row differ by up to $(awk '$4!="nan" && $2 !~ /^ceil/{k=$1" "$2; if (!(k in lo) || $4<lo[k]) lo[k]=$4; if ($4>hi[k]) hi[k]=$4} END{for (k in lo) if (hi[k]/lo[k]>m) m=hi[k]/lo[k]; printf "%.1fx", m}' "$RES")"
  echo "  in this run. Server CPU per unit of work moves much less between runs than throughput: compare it too."
  if [ -r /sys/module/page_reporting/parameters/page_reporting_order ]; then
    echo "- This machine is a VM that hands memory it frees back to its host (free page reporting). The first touch of such"
    echo "  memory is several times slower than of memory in use: runs that need fresh memory (a cold page cache, a server's"
    echo "  first buffers) pay it, which is much of the spread between the rounds of one row."
  fi
  echo
  echo "## Sequential read, whole ${IMG_MIB} MiB export (nbdcopy to null:)"
  echo
  table seq MB/s ceil $READERS
  echo
  echo "nbdcopy reading the local file instead (client cost without NBD): $(show "$(median seq ceil2)" MB/s) (\`${CMD[seq/ceil2]:-}\`)."
  echo "Multi-conn offered: $(for k in $READERS; do echo -n "${NAME[$k]}: ${MULTI[$k]}; "; done)"
  echo
  echo "## 4 KiB random read (fio nbd engine, queue depth 32)"
  echo
  table rr IOPS ceil $READERS
  echo
  echo "## 4 KiB random write (fio nbd engine, queue depth 32)"
  echo
  echo "bootfleet's writes go to the machine's persistent copy-on-write overlay (overlay: none refuses writes with EPERM,"
  echo "so it has no row); the peers write into the image file. Round 1 is the overlay's first touch of each 64 KiB"
  echo "block (copy from the base, then write); later rounds write into blocks it holds. A write into a held block is"
  echo "taken on the request loop when the overlay's file system accepts RWF_NOWAIT writes (tmpfs here, or XFS);"
  echo "ext4 refuses them, and there only writes of whole pages are (they need nothing from the disk); the rest go"
  echo "through worker goroutines."
  echo
  table rw IOPS ceil $WRITERS
  echo
  echo "## 4 KiB random write, on the disk"
  echo
  echo "The same, with the files on the real disk (/dev/$DEV, $(df --output=fstype "$DISK" | tail -1)), where persistent overlays usually live:"
  echo "bootfleet's second server (data directory on the disk) serves a machine with a persistent overlay on a copy"
  echo "of the image imported there; the peers write into a copy of the image on the disk. Before each run, \`sync\`"
  echo "(untimed) writes back what the run before it left dirty. A run dirties at most the file's ${IMG_MIB} MiB, below"
  echo "the kernel's dirty limits here ($(cat /proc/sys/vm/dirty_background_ratio)% and $(cat /proc/sys/vm/dirty_ratio)% of memory), so this measures the file system's"
  echo "buffered write path, not the disk."
  echo
  table rwd IOPS ceil $DWRITERS
  echo
  echo "## 4 KiB random write to the disk, right after a read of it"
  echo
  echo "The case above again, but before each run the server's files leave the page cache (\`sync\`, then"
  echo "\`dd iflag=nocache count=0\` on each) and the server reads its whole export (\`nbdcopy URI null:\`, untimed), as a"
  echo "client that reads its disk and then writes. On ext4 since Linux 6.16 the page cache holds what readahead brought"
  echo "in as large folios (up to 2 MiB), and a 4 KiB write into one walks every buffer head of the folio. bootfleet reads"
  echo "its overlay with \`POSIX_FADV_RANDOM\` (single pages, only those asked for) and copies blocks in a page at a time."
  echo "This kernel: $(uname -r). The ceiling is the one of the case above (no read before it)."
  echo
  table rwd-read IOPS ceil $DWRITERS
  echo
  echo "## 4 KiB random read through a filled overlay"
  echo
  echo "The persistent export again, after the write case wrote into its overlay, so reads come from the overlay."
  echo
  table rr-ovl IOPS ceil bf-pers
  echo
  echo "## Concurrent readers of one image, from the disk"
  echo
  echo "A ${SMALL_MIB} MiB image of random data on the real disk (/dev/$DEV, $(df --output=fstype "$DISK" | tail -1)); before each run its page cache"
  echo "is dropped (\`dd iflag=nocache count=0\`), so the first reader's pages come from the disk and the others should share"
  echo "them. n clients then read the whole image at once, one connection each; bootfleet serves each reader as its own"
  echo "machine (overlay: ephemeral, the lab setting), the peers serve the file. \"Read from disk\" is the sectors /dev/$DEV read"
  echo "during the run (the whole machine's, so other work adds a little): the image is ${SMALL_MIB} MiB, and a server that reads"
  echo "it once per reader would show n times that. Every server reads the same file, bootfleet's imported blob under its"
  echo "data directory (the peers serve it read-only): on this VM a cold read costs more when the disk's host has not read"
  echo "the file lately, and servers reading files of their own were not measured alike. Before each reader count an"
  echo "untimed cold read of the file goes first: the first cold read after a burst of readers was slower, for any server."
  echo "The ceiling is the same n readers on the local file without NBD (\`$(sed "s/^[0-9]* x/n x/" <<< "${CMD[readers/ceil-sm]:-}")\`,"
  echo "after the same drop): what the disk and the shared page cache give when no server and no socket is in the way."
  echo "Medians of $READER_ROUNDS rounds; each round runs 1, then 10, then $READERS_MAX readers on every server in turn. One reader's runs"
  echo "last about a tenth of a second, so each round runs them $SHORT_REPEAT times, each time in a new server order ($((READER_ROUNDS * SHORT_REPEAT)) runs)."
  echo
  readers_table
  echo
  echo "Commands: bootfleet: \`${CMD[readers/bf-sm]:-}\`; peers: \`n x nbdcopy --connections=1 URI null:\` with URI"
  echo "$(for k in qemu-sm kit-sm nbds-sm; do echo -n "${NAME[$k]} ${URI[$k]}; "; done)"
  echo
  echo "## Server commands"
  echo
  echo "- bootfleet: \`${SRVCMD[bf]}\`"
  echo "- qemu-nbd: \`${SRVCMD[qemu]}\`"
  echo "- nbdkit: \`${SRVCMD[kit]}\`"
  echo "- nbd-server: \`${SRVCMD[nbds]}\`"
  if [ -s "$WORK/errors" ]; then
    echo
    echo "## Errors"
    echo
    echo '```'; sort -u "$WORK/errors" | head -30; echo '```'
  fi
} | sub_work > "$OUT"
cat "$OUT"
