package e2e

import "strings"

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
