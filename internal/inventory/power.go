package inventory

import (
	"context"
	"fmt"
	"net"
	"strings"
	"unicode"
)

// Power drivers: how bootfleet switches a machine on and off.
const (
	// DriverWOL sends a Wake-on-LAN magic packet; it can only wake a
	// machine, and can only say the packet was sent. The default for a
	// machine without power settings.
	DriverWOL = "wol"
	// DriverIPMI speaks IPMI v2.0 over LAN (RMCP+, "lanplus") to a BMC.
	DriverIPMI = "ipmi"
	// DriverRedfish speaks Redfish (ComputerSystem.Reset, PowerState).
	DriverRedfish = "redfish"
	// DriverNone: bootfleet does not switch this machine.
	DriverNone = "none"
)

// DefaultCipherSuite is the IPMI cipher suite used when none is set: 17
// (HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128), the strongest suite IPMI
// v2.0 BMCs commonly offer.
const DefaultCipherSuite = 17

// PowerSettings is how bootfleet powers one machine. Password and
// SecureOn are secrets: the store keeps them so the drivers can use them,
// and nothing lists, logs or audits them (see [PowerSettings.Redacted]).
type PowerSettings struct {
	MAC    net.HardwareAddr
	Driver string // wol, ipmi, redfish or none; default wol

	// ipmi and redfish
	Host        string // the BMC's host or host:port (ipmi default port 623, redfish https 443)
	User        string
	Password    string // secret
	CipherSuite int    // ipmi only: 0 means DefaultCipherSuite; valid 0..17
	Insecure    bool   // redfish only: accept the BMC's self-signed certificate

	// wol
	Broadcast net.IP // a subnet-directed broadcast address for a routed network; nil: broadcast on the machine's own interface
	SecureOn  string // secret: the NIC's SecureOn password, six bytes as 11:22:33:44:55:66; empty for none

	Source Source // default api; config settings are rewritten at every start
}

// Power is the power-settings half of a Store.
type Power interface {
	// GetPower returns mac's settings; ErrNotFound when it has none (the
	// caller then uses Wake-on-LAN).
	GetPower(ctx context.Context, mac net.HardwareAddr) (PowerSettings, error)
	// ListPower returns every machine's settings, ordered by MAC.
	ListPower(ctx context.Context) ([]PowerSettings, error)
	// PutPower inserts or replaces p.MAC's settings. ErrNotFound (field
	// mac) when no machine has that MAC. Removing the machine removes them.
	PutPower(ctx context.Context, p PowerSettings) error
	// DeletePower removes mac's settings; none is not an error.
	DeletePower(ctx context.Context, mac net.HardwareAddr) error
}

// Validate checks p and fills defaults (Driver, CipherSuite, Source).
func (p *PowerSettings) Validate() error {
	if len(p.MAC) != 6 {
		return invalid("mac", "want a 6-byte Ethernet MAC, got %q", p.MAC.String())
	}
	if p.Driver == "" {
		p.Driver = DriverWOL
	}
	switch p.Driver {
	case DriverWOL:
		if p.Host != "" || p.User != "" || p.Password != "" {
			return invalid("host", "wol takes no host, user or password; set driver ipmi or redfish to use a BMC")
		}
		if p.Broadcast != nil {
			if p.Broadcast.To4() == nil {
				return invalid("broadcast", "want an IPv4 broadcast address like 10.1.2.255, got %v", p.Broadcast)
			}
			p.Broadcast = p.Broadcast.To4()
		}
		if p.SecureOn != "" {
			if _, err := ParseSecureOn(p.SecureOn); err != nil {
				return err
			}
		}
	case DriverIPMI, DriverRedfish:
		if p.Host == "" || strings.IndexFunc(p.Host, unicode.IsSpace) >= 0 || len(p.Host) > 255 {
			return invalid("host", "want the BMC's host name or address (host or host:port), got %q", p.Host)
		}
		if p.User == "" || len(p.User) > 64 {
			return invalid("user", "want the BMC user name (1 to 64 characters), got %d characters", len(p.User))
		}
		if len(p.Password) > 255 {
			return invalid("password", "want at most 255 characters, got %d", len(p.Password))
		}
		if p.Broadcast != nil || p.SecureOn != "" {
			return invalid("broadcast", "broadcast and secureon are for driver wol only")
		}
	case DriverNone:
		if p.Host != "" || p.User != "" || p.Password != "" || p.Broadcast != nil || p.SecureOn != "" {
			return invalid("driver", "driver none takes no other settings; remove them or pick wol, ipmi or redfish")
		}
	default:
		return invalid("driver", "want wol, ipmi, redfish or none, got %q", p.Driver)
	}
	if p.Driver == DriverIPMI {
		if p.CipherSuite == 0 {
			p.CipherSuite = DefaultCipherSuite
		}
		if p.CipherSuite < 0 || p.CipherSuite > 17 {
			return invalid("cipher_suite", "want an IPMI v2.0 cipher suite 0..17 (default 17), got %d", p.CipherSuite)
		}
	} else if p.CipherSuite != 0 {
		return invalid("cipher_suite", "a cipher suite is for driver ipmi only")
	}
	if p.Insecure && p.Driver != DriverRedfish {
		return invalid("insecure", "insecure is for driver redfish only")
	}
	return checkSource(&p.Source)
}

// ParseSecureOn reads a SecureOn password: six bytes written like a MAC.
func ParseSecureOn(s string) ([]byte, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		// The value is a secret: never echo it.
		return nil, invalid("secureon", "want six bytes written like a MAC, 11:22:33:44:55:66 (the value is not shown)")
	}
	return hw, nil
}

// Redacted returns p with its secrets replaced by "(set)", for answers,
// listings, logs and the audit trail.
func (p PowerSettings) Redacted() PowerSettings {
	if p.Password != "" {
		p.Password = Hidden
	}
	if p.SecureOn != "" {
		p.SecureOn = Hidden
	}
	return p
}

// Hidden stands for a secret that is set.
const Hidden = "(set)"

// String describes p without its secrets.
func (p PowerSettings) String() string {
	r := p.Redacted()
	switch r.Driver {
	case DriverIPMI:
		return fmt.Sprintf("driver=ipmi host=%s user=%s password=%s cipher_suite=%d", r.Host, r.User, orNone(r.Password), r.CipherSuite)
	case DriverRedfish:
		return fmt.Sprintf("driver=redfish host=%s user=%s password=%s insecure=%t", r.Host, r.User, orNone(r.Password), r.Insecure)
	case DriverWOL, "":
		b := "interface"
		if r.Broadcast != nil {
			b = r.Broadcast.String()
		}
		return fmt.Sprintf("driver=wol broadcast=%s secureon=%s", b, orNone(r.SecureOn))
	}
	return "driver=" + r.Driver
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
