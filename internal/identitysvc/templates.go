package identitysvc

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/bootfleet/bootfleet/internal/identity"
)

// FileSpec is one files: entry of a profile or machine, as configured.
type FileSpec struct {
	Path  string
	Mode  uint32
	Owner string // USER[:GROUP]; empty for root
	// Template is the Go template of the contents (text/template), read
	// from the config or from the file it names.
	Template string
}

// Set is the files: and vars: of one profile or one machine.
type Set struct {
	Key   string // the config key, for errors: profiles.lab or machines[3]
	Files []FileSpec
	Vars  map[string]string
}

// Vars is what a template sees: {{.Name}}, {{.MAC}}, {{.IP}} (the
// reserved address, or the one the machine boots from), {{.Profile}} and
// {{.Vars.KEY}}, the profile's vars overlaid with the machine's.
type Vars struct {
	Name    string
	MAC     string
	IP      string
	Profile string
	Vars    map[string]string
}

// fields are the names a template may use after the dot.
var fields = []string{"Name", "MAC", "IP", "Profile", "Vars"}

type compiled struct {
	spec FileSpec
	tmpl *template.Template
}

// Templates renders the files of each machine: its profile's, then its
// own, which replace a profile file of the same path.
type Templates struct {
	profiles    map[string][]compiled
	profileVars map[string]map[string]string
	machines    map[string][]compiled // by MAC
	machineVars map[string]map[string]string
	// The sets as configured, so that a machine's render can put the
	// inventory's sets beside them (Service.templatesFor).
	profileSets map[string]Set
	machineSets map[string]MachineSet
}

// NewTemplates parses every template and checks what it uses: a field
// that does not exist, or a {{.Vars.KEY}} that neither the profile nor
// (for a machine's own file) the machine sets, is refused here, when it
// is configured, rather than at a boot. machines map MACs to their set
// and profile (empty: the default).
func NewTemplates(profiles map[string]Set, machines map[string]MachineSet) (*Templates, error) {
	t := &Templates{profiles: map[string][]compiled{}, profileVars: map[string]map[string]string{},
		machines: map[string][]compiled{}, machineVars: map[string]map[string]string{},
		profileSets: profiles, machineSets: machines}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(profiles)) {
		set := profiles[name]
		t.profileVars[name] = set.Vars
		cs, err := compileSet(set, set.Vars)
		errs = append(errs, err)
		t.profiles[name] = cs
	}
	for _, mac := range slices.Sorted(maps.Keys(machines)) {
		ms := machines[mac]
		t.machineVars[mac] = ms.Vars
		// A machine's files see its profile's vars and its own.
		known := merge(profiles[ms.Profile].Vars, ms.Vars)
		cs, err := compileSet(ms.Set, known)
		errs = append(errs, err)
		t.machines[mac] = cs
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// MachineSet is a machine's files: and vars: and the profile it boots
// (its entry's, else the default profile).
type MachineSet struct {
	Set
	Profile string
}

func compileSet(set Set, vars map[string]string) ([]compiled, error) {
	var out []compiled
	var errs []error
	for i, f := range set.Files {
		key := fmt.Sprintf("%s.files[%d]", set.Key, i)
		tm, err := template.New(f.Path).Option("missingkey=error").Parse(f.Template)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): template does not parse: %w", key, f.Path, err))
			continue
		}
		if _, _, err := identity.ParseOwner(f.Owner); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", key, f.Path, err))
			continue
		}
		if err := checkFields(tm, vars); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", key, f.Path, err))
			continue
		}
		out = append(out, compiled{spec: f, tmpl: tm})
	}
	return out, errors.Join(errs...)
}

// checkFields walks every template of tm for .FIELD and .Vars.KEY.
func checkFields(tm *template.Template, vars map[string]string) error {
	var errs []error
	for _, t := range tm.Templates() {
		if t.Tree == nil {
			continue
		}
		walk(t.Tree.Root, func(n *parse.FieldNode) {
			switch {
			case !slices.Contains(fields, n.Ident[0]):
				errs = append(errs, fmt.Errorf("unknown variable .%s; a template sees %s", strings.Join(n.Ident, "."), strings.Join(dotted(fields), ", ")))
			case n.Ident[0] == "Vars" && len(n.Ident) > 1:
				if _, ok := vars[n.Ident[1]]; !ok {
					errs = append(errs, fmt.Errorf("unknown variable .Vars.%s; set it under vars: of the profile (or of the machine, for a machine's own file); set: %s",
						n.Ident[1], strings.Join(slices.Sorted(maps.Keys(vars)), ", ")))
				}
			}
		})
	}
	return errors.Join(errs...)
}

func dotted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "." + s
	}
	return out
}

// walk calls fn for every field node under n.
func walk(n parse.Node, fn func(*parse.FieldNode)) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x != nil {
			for _, c := range x.Nodes {
				walk(c, fn)
			}
		}
	case *parse.ActionNode:
		walk(x.Pipe, fn)
	case *parse.PipeNode:
		if x != nil {
			for _, c := range x.Cmds {
				walk(c, fn)
			}
		}
	case *parse.CommandNode:
		for _, a := range x.Args {
			walk(a, fn)
		}
	case *parse.FieldNode:
		fn(x)
	case *parse.ChainNode:
		walk(x.Node, fn)
	case *parse.IfNode:
		walkBranch(&x.BranchNode, fn)
	case *parse.RangeNode:
		walkBranch(&x.BranchNode, fn)
	case *parse.WithNode:
		walkBranch(&x.BranchNode, fn)
	case *parse.TemplateNode:
		walk(x.Pipe, fn)
	}
}

func walkBranch(b *parse.BranchNode, fn func(*parse.FieldNode)) {
	walk(b.Pipe, fn)
	walk(b.List, fn)
	if b.ElseList != nil {
		walk(b.ElseList, fn)
	}
}

func merge(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// Machine is who a render is for.
type Machine struct {
	MAC     net.HardwareAddr
	Name    string
	Profile string // the profile it boots (resolved, not empty for the default)
	IP      net.IP // the reserved address, else the one it boots from; nil for none
}

// Render renders every file m gets, profile files first, in path order.
// One failing template fails the whole render: no machine boots with
// part of its files.
func (t *Templates) Render(m Machine) ([]identity.File, error) {
	key := m.MAC.String()
	v := Vars{Name: m.Name, MAC: key, Profile: m.Profile, Vars: merge(t.profileVars[m.Profile], t.machineVars[key])}
	if m.IP != nil {
		v.IP = m.IP.String()
	}
	byPath := map[string]compiled{}
	for _, c := range t.profiles[m.Profile] {
		byPath[c.spec.Path] = c
	}
	for _, c := range t.machines[key] {
		byPath[c.spec.Path] = c
	}
	paths := slices.Collect(maps.Keys(byPath))
	sort.Strings(paths)
	out := make([]identity.File, 0, len(paths))
	for _, p := range paths {
		c := byPath[p]
		var b bytes.Buffer
		if err := c.tmpl.Execute(&b, v); err != nil {
			return nil, fmt.Errorf("render %s for %s: %w", p, key, err)
		}
		out = append(out, identity.File{Path: p, Mode: c.spec.Mode, Owner: c.spec.Owner, Content: b.Bytes()})
	}
	return out, nil
}
