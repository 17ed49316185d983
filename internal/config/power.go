package config

// MachinePower is machines[].power: how bootfleet switches the machine on
// and off. Without it a machine is woken by Wake-on-LAN on interface.
// Secrets are never written in this file, which many people read: they
// are named by file.
type MachinePower struct {
	// Driver is wol (default), ipmi, redfish or none.
	Driver string `yaml:"driver"`
	// Host is the BMC's host or host:port (ipmi, redfish).
	Host string `yaml:"host"`
	User string `yaml:"user"`
	// PasswordFile holds the BMC password (ipmi, redfish); trailing
	// newlines are dropped.
	PasswordFile string `yaml:"password_file"`
	// CipherSuite is the IPMI v2.0 cipher suite, 0..17; default 17.
	CipherSuite int `yaml:"cipher_suite"`
	// Insecure accepts a Redfish BMC's self-signed certificate.
	Insecure bool `yaml:"insecure"`
	// Broadcast is a subnet-directed broadcast address (wol) for a
	// machine on a routed network, e.g. 10.1.2.255.
	Broadcast string `yaml:"broadcast"`
	// SecureOnFile holds the NIC's SecureOn password (wol), written like
	// a MAC: 11:22:33:44:55:66.
	SecureOnFile string `yaml:"secureon_file"`
}
