// Package buildinfo says which bootfleet this binary is: the version the
// build stamped into it (make build passes git describe through -ldflags
// -X) and the Go toolchain that built it. The CLI's `version` command, the
// API and the server's start-up log line report it, so an admin can tell
// which build answered.
package buildinfo

import (
	"runtime"
	"strings"
)

// version is set at link time:
// -X github.com/bootfleet/bootfleet/internal/buildinfo.version=V.
var version string

// Version is the stamped version without a leading "v" (git describe's
// form, e.g. 0.4.0-12-gabc1234), or "dev" for a build that was not
// stamped (go build, go test).
func Version() string {
	if version == "" {
		return "dev"
	}
	return strings.TrimPrefix(version, "v")
}

// String is the version with the toolchain and platform, for humans.
func String() string {
	return "bootfleet " + Version() + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
