package inventory

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// RootFile is one files: entry of a profile or a machine set through the
// API: a file the agent writes into the machine's diskless root at every
// boot, its contents rendered from Template (package identitysvc parses
// and checks the template; the store keeps it as text).
type RootFile struct {
	Path     string `json:"path"`            // absolute, clean path in the root
	Mode     uint32 `json:"mode"`            // permission bits, at most 07777; 0 is 0644
	Owner    string `json:"owner,omitempty"` // USER or USER:GROUP of the root; empty for root
	Template string `json:"template"`        // Go text/template of the contents
}

// Limits on files: and vars: of one profile or machine.
const (
	MaxRootFiles        = 64
	MaxTemplateLen      = 64 << 10
	MaxVars             = 64
	MaxVarValueLen      = 4096
	DefaultRootFileMode = 0o644
)

var varNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// validateRootFiles checks files: and vars: and fills each file's
// default mode. Owners and the templates themselves are checked by
// package identitysvc, which knows what a template may say.
func validateRootFiles(files []RootFile, vars map[string]string) error {
	if len(vars) > MaxVars {
		return invalid("vars", "at most %d vars, got %d", MaxVars, len(vars))
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if !varNameRE.MatchString(k) {
			return invalid("vars", "%q: want a name of letters, digits and _ not starting with a digit, so that templates can say {{.Vars.NAME}}", k)
		}
		if len(vars[k]) > MaxVarValueLen {
			return invalid("vars", "%s: at most %d bytes, got %d", k, MaxVarValueLen, len(vars[k]))
		}
	}
	if len(files) > MaxRootFiles {
		return invalid("files", "at most %d files, got %d", MaxRootFiles, len(files))
	}
	seen := map[string]bool{}
	for i := range files {
		f := &files[i]
		switch {
		case f.Path == "" || f.Path[0] != '/' || path.Clean(f.Path) != f.Path || f.Path == "/" || strings.ContainsRune(f.Path, 0):
			return invalid("files", "files[%d]: want an absolute, clean path of a file in the machine's root, got %q", i, f.Path)
		case seen[f.Path]:
			return invalid("files", "files[%d]: %s is given twice", i, f.Path)
		case f.Mode > 0o7777:
			return invalid("files", "files[%d] (%s): mode %#o: want permission bits like 0644, at most 07777", i, f.Path, f.Mode)
		case len(f.Template) > MaxTemplateLen:
			return invalid("files", "files[%d] (%s): template of %d bytes, at most %d", i, f.Path, len(f.Template), MaxTemplateLen)
		}
		seen[f.Path] = true
		if f.Mode == 0 {
			f.Mode = DefaultRootFileMode
		}
	}
	return nil
}

// String is the file as the CLI shows it: PATH MODE OWNER.
func (f RootFile) String() string {
	owner := f.Owner
	if owner == "" {
		owner = "root"
	}
	return fmt.Sprintf("%s %04o %s", f.Path, f.Mode, owner)
}
