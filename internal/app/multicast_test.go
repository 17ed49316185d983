package app

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestRunMulticasts: with multicast.mode auto the server opens its
// request socket on the configured port, says so, and stops cleanly.
func TestRunMulticasts(t *testing.T) {
	c := testConfig(t, testutil.FreeAddr(t))
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := probe.LocalAddr().(*net.UDPAddr).Port
	probe.Close()
	c.Multicast.Mode, c.Multicast.Port = "auto", port
	r := startRun(t, c)
	testutil.Eventually(t, 10*time.Second, "the multicast sender up", func() error {
		if !strings.Contains(r.logs.String(), "multicast of diskless roots on") {
			return errors.New("no \"multicast of diskless roots on\" in the log yet")
		}
		return nil
	})
	if _, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); err == nil {
		t.Fatalf("port %d is free: the sender does not listen on multicast.port", port)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
