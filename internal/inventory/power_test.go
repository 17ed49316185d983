package inventory

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestPowerSettingsValidate(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}
	for _, tt := range []struct {
		p     PowerSettings
		field string // "" for valid
	}{
		{PowerSettings{MAC: mac}, ""},
		{PowerSettings{MAC: mac, Broadcast: net.IPv4(10, 1, 2, 255), SecureOn: "11:22:33:44:55:66"}, ""},
		{PowerSettings{MAC: mac, Driver: "ipmi", Host: "bmc:623", User: "admin", CipherSuite: 3}, ""},
		{PowerSettings{MAC: mac, Driver: "redfish", Host: "bmc/redfish/v1/Systems/1", User: "admin", Insecure: true}, ""},
		{PowerSettings{MAC: mac, Driver: "none"}, ""},
		{PowerSettings{MAC: mac[:5]}, "mac"},
		{PowerSettings{MAC: mac, Host: "bmc"}, "host"},
		{PowerSettings{MAC: mac, SecureOn: "not-six-bytes"}, "secureon"},
		{PowerSettings{MAC: mac, Broadcast: net.ParseIP("fd00::1")}, "broadcast"},
		{PowerSettings{MAC: mac, Driver: "ipmi", User: "admin"}, "host"},
		{PowerSettings{MAC: mac, Driver: "ipmi", Host: "bmc"}, "user"},
		{PowerSettings{MAC: mac, Driver: "ipmi", Host: "b mc", User: "u"}, "host"},
		{PowerSettings{MAC: mac, Driver: "ipmi", Host: "bmc", User: "u", CipherSuite: 18}, "cipher_suite"},
		{PowerSettings{MAC: mac, Driver: "redfish", Host: "bmc", User: "u", CipherSuite: 3}, "cipher_suite"},
		{PowerSettings{MAC: mac, Insecure: true}, "insecure"},
		{PowerSettings{MAC: mac, Driver: "none", Host: "bmc"}, "driver"},
		{PowerSettings{MAC: mac, Driver: "amt"}, "driver"},
	} {
		err := tt.p.Validate()
		var ie *Error
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tt.p, err)
		case tt.field != "" && (!errors.As(err, &ie) || ie.Field != tt.field):
			t.Errorf("%+v: %v, want an error about %s", tt.p, err, tt.field)
		}
	}
	p := PowerSettings{MAC: mac}
	p.Validate()
	if p.Driver != DriverWOL {
		t.Errorf("default driver %q, want wol", p.Driver)
	}
	p = PowerSettings{MAC: mac, Driver: "ipmi", Host: "bmc", User: "u"}
	p.Validate()
	if p.CipherSuite != DefaultCipherSuite {
		t.Errorf("default cipher suite %d, want %d", p.CipherSuite, DefaultCipherSuite)
	}
}

// TestPowerSettingsNeverShowSecrets: String and Redacted, what listings,
// logs and the audit trail use, hide both secrets.
func TestPowerSettingsNeverShowSecrets(t *testing.T) {
	for _, p := range []PowerSettings{
		{Driver: "ipmi", Host: "bmc", User: "admin", Password: "pw-SECRET", CipherSuite: 17},
		{Driver: "redfish", Host: "bmc", User: "admin", Password: "pw-SECRET"},
		{Driver: "wol", SecureOn: "aa:bb:cc:dd:ee:ff"},
	} {
		s, r := p.String(), p.Redacted()
		if strings.Contains(s, "SECRET") || strings.Contains(s, "aa:bb") || r.Password == "pw-SECRET" || r.SecureOn == "aa:bb:cc:dd:ee:ff" {
			t.Errorf("%s / %+v shows a secret", s, r)
		}
		if !strings.Contains(s, Hidden) {
			t.Errorf("%s does not say a secret is set", s)
		}
	}
}
