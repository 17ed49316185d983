package config

import "regexp"

// Server names this server in its fleet: every bootfleet sharing a store
// registers there under its name and keeps a heartbeat, and
// `bootfleet server list` shows them.
type Server struct {
	// Name is this server's name, unique among the servers sharing the
	// store. Default: the host name. Letters, digits, '.', '_' and '-',
	// starting with a letter or digit, at most 253.
	Name string `yaml:"name"`
}

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

func (s Server) validate(bad func(key, format string, args ...any)) {
	if s.Name != "" && !serverNameRE.MatchString(s.Name) {
		bad("server.name", "want a name of letters, digits, . _ - (at most 253, as a host name), got %q; or remove it to use the host name", s.Name)
	}
}
