package storm

import (
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name             string
		cfg              Config
		wantErr          bool
		fwWait, ipxeWait time.Duration
	}{
		{"uefi: EDK II's 4 s, then iPXE's 1 s", Config{Interface: "eth0", Clients: 1, Firmware: FirmwareUEFI}, false, 4 * time.Second, time.Second},
		{"bios alike", Config{Interface: "eth0", Clients: 1, Firmware: FirmwareBIOS}, false, 4 * time.Second, time.Second},
		{"ipxe: 1 s", Config{Interface: "eth0", Clients: 1, Firmware: FirmwareIPXE}, false, time.Second, time.Second},
		{"a set timeout holds for both", Config{Interface: "eth0", Clients: 1, Firmware: FirmwareUEFI, DHCP: DHCPOptions{Timeout: 2 * time.Second}}, false, 2 * time.Second, 2 * time.Second},
		{"no interface", Config{Clients: 1, Firmware: FirmwareUEFI}, true, 0, 0},
		{"no clients", Config{Interface: "eth0", Firmware: FirmwareUEFI}, true, 0, 0},
		{"unknown firmware", Config{Interface: "eth0", Clients: 1, Firmware: "coreboot"}, true, 0, 0},
		{"blksize too small", Config{Interface: "eth0", Clients: 1, Firmware: FirmwareBIOS, TFTP: tftp.ClientOptions{BlockSize: 4}}, true, 0, 0},
		{"prefix too long for the clients", Config{Interface: "eth0", Clients: 300, Firmware: FirmwareBIOS, MACPrefix: "02:00:00:00:00"}, true, 0, 0},
		{"negative ramp", Config{Interface: "eth0", Clients: 1, Firmware: FirmwareBIOS, Ramp: -time.Second}, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			err := c.setDefaults()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if c.DHCP.Timeout != tt.fwWait || c.ipxeDHCP.Timeout != tt.ipxeWait || c.DHCP.Tries != 4 || c.ipxeDHCP.Tries != 4 {
				t.Fatalf("DHCP %+v, iPXE's %+v: want first waits %v and %v, 4 tries", c.DHCP, c.ipxeDHCP, tt.fwWait, tt.ipxeWait)
			}
			if c.Trace == nil || c.NBDDepth != 8 || c.DoneParam != "done" || c.Timeout != 10*time.Minute {
				t.Fatalf("defaults not applied: %+v", c)
			}
		})
	}
}
