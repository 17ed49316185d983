package config

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/bootfleet/bootfleet/internal/identity"
)

// Identity configures what makes each diskless machine itself.
type Identity struct {
	// KeyFile holds the fleet's identity key, which seals machines' SSH
	// host keys in the inventory; default DATA/identity.key. Every server
	// of a fleet needs the same file: the first server to start makes it
	// and stores its check value in the inventory; copy it to the others,
	// which refuse to serve identities with any other key.
	KeyFile string `yaml:"key_file"`
}

// File is one entry of files: under a profile or a machine: a file the
// agent writes into the machine's diskless root at every boot, rendered
// from a Go template (package identitysvc says what it sees).
type File struct {
	Path  string `yaml:"path"`  // absolute path in the root
	Mode  string `yaml:"mode"`  // octal, default 0644
	Owner string `yaml:"owner"` // USER or USER:GROUP of the root; default root
	// Template is the contents as a template; TemplateFile names a file
	// holding it instead (an absolute path on the server). One of them.
	Template     string `yaml:"template"`
	TemplateFile string `yaml:"template_file"`
}

// ParseMode is the file's mode; "" is 0644.
func (f File) ParseMode() (uint32, error) {
	if f.Mode == "" {
		return 0o644, nil
	}
	m, err := strconv.ParseUint(f.Mode, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("want an octal mode like 0644 or 0600, got %q", f.Mode)
	}
	return uint32(m), nil
}

var varRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateFiles checks a files: list and a vars: map under key; the
// templates themselves are parsed and checked when the server starts
// (identitysvc.NewTemplates), which reads template_file.
func validateFiles(key string, files []File, vars map[string]string, bad func(key, format string, args ...any)) {
	for _, name := range sortedKeys(vars) {
		if !varRE.MatchString(name) {
			bad(key+".vars."+name, "want a name of letters, digits and _ not starting with a digit, so that templates can say {{.Vars.NAME}}")
		}
	}
	seen := map[string]int{}
	for i, f := range files {
		fk := fmt.Sprintf("%s.files[%d]", key, i)
		if f.Path == "" || f.Path[0] != '/' || path.Clean(f.Path) != f.Path || f.Path == "/" {
			bad(fk+".path", "want an absolute, clean path of a file in the machine's root, got %q", f.Path)
		}
		if j, dup := seen[f.Path]; dup {
			bad(fk+".path", "%s is already at files[%d]", f.Path, j)
		}
		seen[f.Path] = i
		if _, err := f.ParseMode(); err != nil {
			bad(fk+".mode", "%v", err)
		}
		if _, _, err := identity.ParseOwner(f.Owner); err != nil {
			bad(fk+".owner", "%v", err)
		}
		switch {
		case (f.Template == "") == (f.TemplateFile == ""):
			bad(fk, "set exactly one of template (the contents) and template_file (a file holding them)")
		case f.TemplateFile != "" && !filepath.IsAbs(f.TemplateFile):
			bad(fk+".template_file", "want an absolute path on the server, got %q", f.TemplateFile)
		}
	}
}
