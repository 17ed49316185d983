package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Where Debian's iPXE loses tftm's DATA. iPXE's tftp.c builds the group's
// address for its multicast socket in a stack union it never clears:
// family, port and address are set, the 20 bytes after the address are
// whatever the stack held. udp.c's udp_demux compares those bytes with the
// received datagram's destination (cleared by ipv4_rx), so no socket
// matches and the datagram is dropped before TFTP sees it. The test below
// shows it inside the VM: it pauses the VM each time bootfleet makes it a
// group's master, finds the socket's address in guest RAM, and for the
// first file clears the 20 bytes through QEMU's gdb stub. That file then
// comes whole by tftm; the next, left alone, is lost as before.

// hmp sends one human-monitor command to the QEMU listening on sock and
// returns what it printed up to the next prompt.
func hmp(sock, cmd string) (string, error) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("QEMU monitor %s: %w", sock, err)
	}
	defer c.Close()
	// pmemsave of the VM's 512 MiB is the slowest command sent.
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	r := bufio.NewReader(c)
	prompt := func() (string, error) {
		var b strings.Builder
		for !strings.HasSuffix(b.String(), "(qemu) ") {
			ch, err := r.ReadByte()
			if err != nil {
				return b.String(), fmt.Errorf("QEMU monitor: want the (qemu) prompt, got %q: %w", b.String(), err)
			}
			b.WriteByte(ch)
		}
		return b.String(), nil
	}
	if _, err := prompt(); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c, "%s\n", cmd); err != nil {
		return "", err
	}
	out, err := prompt()
	// The monitor echoes the command as it is typed; keep what follows.
	if i := strings.LastIndex(out, "\r\n"); i >= 0 {
		out = strings.TrimSuffix(out[i+2:], "(qemu) ")
	}
	return out, err
}

// groupSockaddr is where iPXE keeps a multicast socket's local address in
// guest RAM: a struct sockaddr_tcpip (32 bytes: family, flags, port, scope
// id, then the IPv4 address and 20 bytes of padding) immediately followed
// by an identical peer address, as in struct udp_connection, since tftp.c
// opens the socket with the group as both.
type groupSockaddr struct {
	phys uint32
	raw  []byte
}

// padding is what udp_demux compares beyond the address.
func (g groupSockaddr) padding() []byte { return g.raw[12:32] }

// findGroupSockets returns every local+peer pair in mem naming group.
func findGroupSockets(mem []byte, group netip.AddrPort) []groupSockaddr {
	a4 := group.Addr().As4()
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], group.Port())
	var out []groupSockaddr
	for off := 0; ; {
		i := bytes.Index(mem[off:], a4[:])
		if i < 0 {
			return out
		}
		at := off + i - 8
		off += i + 1
		if at < 0 || at+64 > len(mem) || !bytes.Equal(mem[at+4:at+6], port[:]) {
			continue
		}
		if bytes.Equal(mem[at:at+32], mem[at+32:at+64]) {
			out = append(out, groupSockaddr{phys: uint32(at), raw: append([]byte(nil), mem[at:at+32]...)})
		}
	}
}

// tftmGuest is a VM paused and inspected through its monitor and gdb stub.
type tftmGuest struct {
	dir, mon, gdb string
	server        *proc
}

// inspect pauses the VM and the server, finds the VM's multicast socket
// for group and, when clear is set, zeroes its padding. The server is
// paused too so it does not give up on a master that cannot answer.
func (g tftmGuest) inspect(t *testing.T, group netip.AddrPort, clear bool) groupSockaddr {
	t.Helper()
	if out, err := hmp(g.mon, "stop"); err != nil {
		t.Fatalf("stop the VM: %v %s", err, out)
	}
	pid := g.server.cmd.Process.Pid
	syscall.Kill(pid, syscall.SIGSTOP)
	defer func() {
		syscall.Kill(pid, syscall.SIGCONT)
		if out, err := hmp(g.mon, "cont"); err != nil {
			t.Errorf("resume the VM: %v %s", err, out)
		}
	}()
	dump := filepath.Join(g.dir, "ram.bin")
	// Quoted: HMP would read an unquoted /path as a division.
	if out, err := hmp(g.mon, fmt.Sprintf("pmemsave 0 0x20000000 %q", dump)); err != nil || out != "" {
		t.Fatalf("pmemsave: %v %q", err, out)
	}
	mem, err := os.ReadFile(dump)
	os.Remove(dump)
	if err != nil {
		t.Fatal(err)
	}
	found := findGroupSockets(mem, group)
	if len(found) != 1 {
		t.Fatalf("found %d multicast sockets for %v in guest RAM, want 1", len(found), group)
	}
	s := found[0]
	if clear {
		args := []string{"-batch", "-ex", "target remote " + g.gdb}
		for o := uint32(12); o < 32; o += 4 {
			args = append(args, "-ex", fmt.Sprintf("set *(unsigned int *)%#x = 0", s.phys+o))
		}
		args = append(args, "-ex", "echo READBACK\\n", "-ex", fmt.Sprintf("x/5xw %#x", s.phys+12), "-ex", "detach")
		out, err := exec.Command("gdb", args...).CombinedOutput()
		_, back, _ := strings.Cut(string(out), "READBACK")
		if err != nil || strings.Count(back, "0x00000000") != 5 {
			t.Fatalf("gdb could not clear %#x: %v\n%s", s.phys+12, err, out)
		}
	}
	return s
}

// countDatagrams counts datagrams to group in pcap.
func countDatagrams(t *testing.T, pcap string, group netip.AddrPort) int {
	t.Helper()
	filter := fmt.Sprintf("ip.dst==%s && udp.dstport==%d", group.Addr(), group.Port())
	out, err := exec.Command("tshark", "-r", pcap, "-Y", filter, "-T", "fields", "-e", "frame.number").Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", pcap, err)
	}
	return len(strings.Fields(string(out)))
}

// TestTFTMiPXEDemux: with tftp.multicast on, a VM of each firmware whose
// iPXE scripts use (BIOS: QEMU's virtio ROM; UEFI: ipxe.efi, both Debian's
// 1.0.0+git-20190125) boots with the first file's multicast socket
// repaired in guest RAM and the second's left alone. Proven: both sockets
// hold stack garbage after the group address; DATA to the second group
// reached the VM's tap, yet its master never ACKed it and the file came by
// HTTP; the repaired file came whole by tftm and nothing else by HTTP.
// If an iPXE's padding is clean, the test fails: re-measure tftm with it.
func TestTFTMiPXEDemux(t *testing.T) {
	e := needEnv(t)
	for _, fw := range []firmware{bios, uefi} {
		t.Run(string(fw), func(t *testing.T) { tftmDemux(t, e, fw) })
	}
}

func tftmDemux(t *testing.T, e *env, fw firmware) {
	dir := artifactDir(t)
	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	tap := captureOn(t, lan, dir, "tap0", "tshark-tap0")
	server := startBootfleetConfig(t, e, lan, dir, tftmTemplate, map[string]string{"Data": filepath.Join(t.TempDir(), "data")})
	g := tftmGuest{dir: dir, mon: filepath.Join(dir, "mon.sock"), gdb: filepath.Join(dir, "gdb.sock"), server: server}
	qemu := startVM(t, e, lan, dir, vm{fw: fw, mac: "52:54:00:e2:f0:21", tap: "tap0", extra: []string{
		"-monitor", "unix:" + g.mon + ",server=on,wait=off",
		"-gdb", "unix:" + g.gdb + ",server=on,wait=off",
	}})

	ctx, cancel := contextTimeout(bootTimeout(t))
	defer cancel()
	// The script fetches kernel, then initrd: one new master each.
	var groups []netip.AddrPort
	for next := 0; len(groups) < 2; {
		lines, changed := server.out.snapshot(next)
		next += len(lines)
		for _, l := range lines {
			kv := parseLogfmt(l)
			if kv["msg"] != "tftp: multicast master" || kv["from_block"] != "1" || len(groups) == 2 {
				continue
			}
			group, err := netip.ParseAddrPort(kv["group"])
			if err != nil {
				t.Fatalf("server logged group=%q: %v", kv["group"], err)
			}
			s := g.inspect(t, group, len(groups) == 0)
			t.Logf("%s: %s's socket at %#x: %s", fw, kv["file"], s.phys, hex.EncodeToString(s.raw))
			if bytes.Equal(s.padding(), make([]byte, len(s.padding()))) {
				t.Errorf("%s: the padding after %v in %s's socket is clean: this iPXE may take tftm, measure it", fw, group, kv["file"])
			}
			groups = append(groups, group)
		}
		if len(groups) == 2 {
			break
		}
		select {
		case <-changed:
		case <-qemu.exited:
			t.Fatalf("QEMU exited after %d multicast masters, want 2\n%s", len(groups), qemu.out.tail(20))
		case <-ctx.Done():
			t.Fatalf("%d multicast masters after %v, want 2\n%s", len(groups), bootTimeout(t), server.out.tail(20))
		}
	}
	if _, err := qemu.waitLine(ctx, func(line string) (bool, error) {
		return strings.HasPrefix(line, "BOOTFLEET-DONE"), consoleFailure(line)
	}); err != nil {
		t.Fatalf("%s boot: %v\n%s", fw, err, qemu.out.tail(20))
	}
	tap.stop()

	repaired, left := groups[0].String(), groups[1].String()
	size := map[string]string{}
	var tftm, failed, http []map[string]string
	lines, _ := server.out.snapshotAll()
	for _, l := range lines {
		kv := parseLogfmt(l)
		switch kv["msg"] {
		case "tftp: multicast transfer done":
			size[kv["group"]] = kv["size"]
		case "tftp transfer done":
			if kv["group"] != "" {
				tftm = append(tftm, kv)
			}
		case "tftp transfer failed":
			// Newer iPXE first asks for autoexec.ipxe, by plain TFTP.
			if kv["group"] != "" {
				failed = append(failed, kv)
			}
		case "file sent":
			http = append(http, kv)
		}
	}
	if len(tftm) != 1 || tftm[0]["group"] != repaired || tftm[0]["bytes"] != size[repaired] {
		t.Errorf("%s: tftm transfers done %v, want one of %s bytes in %s (the repaired socket)", fw, tftm, size[repaired], repaired)
	} else {
		t.Logf("%s: repaired socket: %s bytes by tftm in %ss (%s MB/s, windowsize 1)", fw, tftm[0]["bytes"], tftm[0]["seconds"], tftm[0]["mbps"])
	}
	if len(failed) != 1 || failed[0]["group"] != left {
		t.Errorf("%s: tftp transfers failed %v, want one, in %s (the socket left alone)", fw, failed, left)
	}
	if len(http) != 1 || http[0]["bytes"] != size[left] {
		t.Errorf("%s: HTTP sent %v, want only the %s bytes %s carried", fw, http, size[left], left)
	} else {
		t.Logf("%s: socket left alone: the server gave the group up after %ss (the RAM dump's pause included), then %s bytes by HTTP in %ss", fw, failed[0]["seconds"], http[0]["bytes"], http[0]["seconds"])
	}
	n := countDatagrams(t, filepath.Join(dir, "tap0.pcap"), groups[1])
	if n == 0 {
		t.Errorf("%s: no datagram to %v on tap0: the loss is before the VM", fw, groups[1])
	}
	t.Logf("%s: %d datagrams to %v reached tap0, none taken", fw, n, groups[1])
	if _, err := strconv.Atoi(size[left]); err != nil {
		t.Errorf("%s: no multicast transfer line for %s", fw, left)
	}
}
