package e2e

import (
	"strings"
	"testing"
)

// logLen is how many lines the server has logged, to read those after.
func (d *debianServer) logLen() int {
	lines, _ := d.server.out.snapshotAll()
	return len(lines)
}

// kernelFetches counts the kernel downloads by unicast the server logged
// since line from: over HTTP (the profile's file, named by its local
// path) and over TFTP (its profiles/ path, iPXE's fallback from mtftp://).
func (d *debianServer) kernelFetches(from int) (http, tftp int) {
	return kernelFetches(d.server, from, d.vmlinuz)
}

// kernelFetches is what server logged of kernel, a local path, by HTTP
// and of any profile's kernel by TFTP, since line from.
func kernelFetches(server *proc, from int, kernel string) (http, tftp int) {
	lines, _ := server.out.snapshotAll()
	for _, l := range lines[from:] {
		kv := parseLogfmt(l)
		switch {
		case kv["msg"] == "file sent" && kv["file"] == kernel:
			http++
		case kv["msg"] == "tftp transfer done" && strings.HasSuffix(kv["file"], "/kernel"):
			tftp++
		}
	}
	return http, tftp
}

// checkKernels checks how the n machines of a round got their kernel.
// Scripts name mtftp:// for one profile's kernel at a time (the group's
// owner); the others fetch it by HTTP. With the group dropped, no kernel
// byte reaches it and every iPXE that asked falls back to plain TFTP;
// with it open, the kernel went to the group and the machines given
// mtftp:// fetched it by no unicast.
func (d *debianServer) checkKernels(t *testing.T, what string, from int, before serverCounters, n int, dropped bool) {
	t.Helper()
	c := d.counters(t).minus(before)
	http, tftp := d.kernelFetches(from)
	size := float64(fileSize(t, d.vmlinuz))
	t.Logf("%s: kernel (%d bytes) by unicast: %d over HTTP, %d over TFTP; mtftp: %.0f RRQs, %.0f bytes (%.2f kernels) to the group",
		what, int64(size), http, tftp, c.mtftpRequests, c.mtftpSent, c.mtftpSent/size)
	if c.mtftpRequests == 0 {
		t.Errorf("%s: no MTFTP request: no script named mtftp:// for the kernel", what)
	}
	if dropped {
		if c.mtftpSent != 0 || tftp == 0 || http+tftp != n {
			t.Errorf("%s: group dropped, yet %.0f bytes sent to it, %d kernels by TFTP and %d by HTTP; want none sent, the mtftp machines by TFTP, all %d by unicast",
				what, c.mtftpSent, tftp, http, n)
		}
		return
	}
	if c.mtftpSent < size || tftp != 0 || http >= n {
		t.Errorf("%s: %.0f bytes to the group, want at least the kernel's %.0f; %d kernels by TFTP, want none; %d by HTTP, want fewer than %d",
			what, c.mtftpSent, size, tftp, http, n)
	}
}
