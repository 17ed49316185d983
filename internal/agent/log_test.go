package agent

import (
	"bytes"
	"testing"
)

func TestConsoleLogger(t *testing.T) {
	var b bytes.Buffer
	NewConsoleLogger(&b).Info("network up", "nic", "eth0")
	if got, want := b.String(), "bootfleet-agent: level=INFO msg=\"network up\" nic=eth0\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
