package cli

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/bootfleet/bootfleet/internal/api"
)

// fileFlags are --var, --file and, when editing, --unvar and --unfile:
// the files: and vars: of a profile or machine.
type fileFlags struct {
	vars, unvars, files, unfiles []string
}

func (ff *fileFlags) register(f *pflag.FlagSet, edit bool) {
	f.StringArrayVar(&ff.vars, "var", nil, "set var KEY=VALUE, seen by file templates as {{.Vars.KEY}} (repeatable)")
	f.StringArrayVar(&ff.files, "file", nil, "write a file into the root at every boot: PATH[:MODE[:OWNER]]=@TEMPLATE_FILE (read here, sent as the template) or PATH[:MODE[:OWNER]]=TEMPLATE (repeatable; see bootfleet machine render)")
	if edit {
		f.StringArrayVar(&ff.unvars, "unvar", nil, "remove var KEY (repeatable)")
		f.StringArrayVar(&ff.unfiles, "unfile", nil, "remove the file at PATH (repeatable)")
	}
}

func (ff *fileFlags) changed() bool {
	return len(ff.vars)+len(ff.unvars)+len(ff.files)+len(ff.unfiles) > 0
}

// apply edits files and vars as the flags say: a --file replaces the one
// at its path, --unfile and --unvar remove. It never changes its inputs.
func (ff *fileFlags) apply(files []api.File, vars map[string]string) ([]api.File, map[string]string, error) {
	set, err := parseLabels("var", ff.vars)
	if err != nil {
		return nil, nil, err
	}
	vars = maps.Clone(vars)
	if vars == nil {
		vars = map[string]string{}
	}
	maps.Copy(vars, set)
	for _, k := range ff.unvars {
		if _, ok := vars[k]; !ok {
			return nil, nil, fmt.Errorf("--unvar %s: no such var; set: %s", k, formatLabels(vars))
		}
		delete(vars, k)
	}
	files = slices.Clone(files)
	for _, spec := range ff.files {
		f, err := parseFileFlag(spec)
		if err != nil {
			return nil, nil, err
		}
		files = slices.DeleteFunc(files, func(o api.File) bool { return o.Path == f.Path })
		files = append(files, f)
	}
	for _, p := range ff.unfiles {
		n := len(files)
		if files = slices.DeleteFunc(files, func(o api.File) bool { return o.Path == p }); len(files) == n {
			return nil, nil, fmt.Errorf("--unfile %s: no file at that path", p)
		}
	}
	return files, vars, nil
}

// parseFileFlag reads PATH[:MODE[:OWNER]]=@TEMPLATE_FILE or =TEMPLATE.
// OWNER may be USER:GROUP, so only the first two colons split.
func parseFileFlag(spec string) (api.File, error) {
	head, body, ok := strings.Cut(spec, "=")
	if !ok {
		return api.File{}, fmt.Errorf("--file %q: want PATH[:MODE[:OWNER]]=@TEMPLATE_FILE or PATH[:MODE[:OWNER]]=TEMPLATE, e.g. /etc/motd:0644:root=@motd.tmpl", spec)
	}
	parts := strings.SplitN(head, ":", 3)
	f := api.File{Path: parts[0], Template: body}
	if len(parts) > 1 {
		f.Mode = parts[1]
	}
	if len(parts) > 2 {
		f.Owner = parts[2]
	}
	if name, ok := strings.CutPrefix(body, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return api.File{}, fmt.Errorf("--file %s: read the template: %w", f.Path, err)
		}
		f.Template = string(b)
	}
	return f, nil
}

// fileRows are the key: value lines of files and vars in show output;
// none when there are none.
func fileRows(files []api.File, vars map[string]string) [][2]string {
	var kv [][2]string
	if len(vars) > 0 {
		kv = append(kv, [2]string{"vars", formatLabels(vars)})
	}
	for _, f := range files {
		mode, owner := f.Mode, f.Owner
		if owner == "" {
			owner = "root"
		}
		kv = append(kv, [2]string{"file " + f.Path, fmt.Sprintf("%s %s, %d bytes of template", mode, owner, len(f.Template))})
	}
	return kv
}
