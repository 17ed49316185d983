package storm

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Image is one file an iPXE script loads.
type Image struct {
	Name string // --name, or the URL's base name as iPXE names it
	URL  string // absolute, resolved against the script's URL
	Args string // command line (kernel) or arguments (others)
	// Alt are the images of the commands joined to this one's by ||
	// (kernel A || kernel B), in order: iPXE runs the next one only when
	// loading the one before failed, so a machine that fails to fetch URL
	// tries each of them in turn. Nil when there are none.
	Alt []Image
}

// Script is what running an iPXE script up to its boot would fetch.
type Script struct {
	// Kernel is the image `boot` starts; its Args is the kernel command
	// line after every imgargs.
	Kernel Image
	// Initrds are the other images loaded (initrd, module, imgfetch), in order.
	Initrds []Image
	// Chain is the URL of a chained image or script when the script ends
	// with chain; Kernel is then empty.
	Chain string
}

// Script parser errors.
var (
	ErrNotIPXE  = errors.New("ipxe script: first line is not #!ipxe")
	ErrNoBoot   = errors.New("ipxe script: ends without boot or chain")
	ErrScriptOp = errors.New("ipxe script: command fails")
)

// maxScriptSteps bounds a script's execution: a script that loops (boot ||
// goto failed, with boot failing) must end in an error, not spin.
const maxScriptSteps = 10000

// quietCommands succeed without effect on what is fetched.
var quietCommands = map[string]bool{
	"echo": true, "sleep": true, "prompt": true, "dhcp": true, "ifopen": true,
	"ifclose": true, "ifconf": true, "ifstat": true, "imgfree": true, "imgstat": true,
	"console": true, "colour": true, "cpair": true, "params": true, "param": true,
	"ntp": true, "show": true, "sync": true, "route": true, "nslookup": true,
}

// ParseScript runs an iPXE script the way iPXE would until it boots or
// chains, and returns what it loaded. base is the script's own URL, against
// which relative URLs resolve; vars are iPXE settings (mac, ip, net0/mac,
// ...) for ${name} expansion, where an unset name expands to nothing as in
// iPXE.
//
// Every command is taken to succeed (so "cmd || goto failed" falls
// through), except commands it does not know, which fail as they would in
// an iPXE without them. Supported: kernel/imgselect/chain/imgexec/boot,
// initrd/module/imgfetch, imgargs, set/clear, goto, isset/iseq, exit and
// the quiet ones (echo, sleep, ...).
func ParseScript(text string, base *url.URL, vars map[string]string) (Script, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if first := strings.TrimSpace(lines[0]); !strings.HasPrefix(first, "#!ipxe") && !strings.HasPrefix(first, "#!gpxe") {
		return Script{}, fmt.Errorf("%w: got %q", ErrNotIPXE, truncateText(first))
	}
	labels := map[string]int{}
	for i, l := range lines {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, ":") {
			labels[strings.TrimSpace(l[1:])] = i
		}
	}
	st := &scriptState{base: base, vars: map[string]string{}}
	for k, v := range vars {
		st.vars[k] = v
	}
	pc := 1
	for steps := 0; pc < len(lines); steps++ {
		if steps >= maxScriptSteps {
			return Script{}, fmt.Errorf("ipxe script: more than %d steps without boot (a retry loop whose command fails?)", maxScriptSteps)
		}
		line := strings.TrimSpace(lines[pc])
		pc++
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ":") {
			continue
		}
		next, done, err := st.runLine(line, labels)
		if err != nil {
			return Script{}, fmt.Errorf("ipxe script line %d: %w", pc, err)
		}
		if done {
			return st.out, nil
		}
		if next >= 0 {
			pc = next
		}
	}
	return Script{}, ErrNoBoot
}

type scriptState struct {
	base *url.URL
	vars map[string]string
	out  Script
}

// runLine runs one line: commands joined by || and &&, each run only if the
// one before succeeded (&&) or failed (||). It returns the line to jump to
// (-1: the next) and whether the script is finished.
func (st *scriptState) runLine(line string, labels map[string]int) (next int, done bool, err error) {
	next = -1
	ok, first := true, true
	// loaded is the image the command before loaded, of kind, while ||
	// follow it.
	var loaded *Image
	var kind string
	for _, part := range splitChain(line) {
		if !first && (part.op == "&&") != ok {
			if loaded != nil && part.op == "||" {
				if loaded, err = st.alternate(loaded, kind, part.cmd); err != nil {
					return -1, false, err
				}
			}
			continue
		}
		first, loaded = false, nil
		args := splitArgs(st.expand(part.cmd))
		if len(args) == 0 {
			continue
		}
		if args[0] == "goto" {
			if len(args) < 2 {
				return -1, false, fmt.Errorf("%w: goto without a label", ErrScriptOp)
			}
			i, found := labels[args[1]]
			if !found {
				return -1, false, fmt.Errorf("%w: goto %s: no such label", ErrScriptOp, args[1])
			}
			return i + 1, false, nil
		}
		ok, done, err = st.command(args)
		if err != nil || done {
			return -1, done, err
		}
		if ok {
			loaded, kind = st.loaded(args[0]), imageKind(args[0])
		}
	}
	return next, false, nil
}

// loaded is the image that command cmd, which succeeded, has just loaded;
// nil if cmd loads none that can have alternates.
func (st *scriptState) loaded(cmd string) *Image {
	switch imageKind(cmd) {
	case "kernel":
		return &st.out.Kernel
	case "initrd":
		return &st.out.Initrds[len(st.out.Initrds)-1]
	}
	return nil
}

// alternate adds cmd, a command skipped after || because the one before
// loaded img, to img's alternates when it loads the same kind of image,
// and returns img to keep collecting; otherwise (goto failed, echo, ...)
// it returns nil, which ends the alternates.
func (st *scriptState) alternate(img *Image, kind, cmd string) (*Image, error) {
	args := splitArgs(st.expand(cmd))
	if len(args) == 0 || imageKind(args[0]) != kind {
		return nil, nil
	}
	alt, err := st.image(args[1:])
	if err != nil {
		return nil, err
	}
	img.Alt = append(img.Alt, alt)
	return img, nil
}

// imageKind groups the commands that load an image: "kernel" for those
// that select the image to boot, "initrd" for the others, "" otherwise.
func imageKind(cmd string) string {
	switch cmd {
	case "kernel", "imgselect":
		return "kernel"
	case "initrd", "module", "imgfetch":
		return "initrd"
	}
	return ""
}

// command runs one command and reports whether it succeeded.
func (st *scriptState) command(args []string) (ok, done bool, err error) {
	switch cmd := args[0]; cmd {
	case "kernel", "imgselect", "chain", "imgexec":
		img, err := st.image(args[1:])
		if err != nil {
			return false, false, err
		}
		if cmd == "chain" || cmd == "imgexec" {
			st.out = Script{Chain: img.URL}
			return true, true, nil
		}
		st.out.Kernel = img
		return true, false, nil
	case "initrd", "module", "imgfetch":
		img, err := st.image(args[1:])
		if err != nil {
			return false, false, err
		}
		st.out.Initrds = append(st.out.Initrds, img)
		return true, false, nil
	case "imgargs":
		if len(args) < 2 {
			return false, false, fmt.Errorf("%w: imgargs without an image name", ErrScriptOp)
		}
		if args[1] != st.out.Kernel.Name {
			return false, false, nil // iPXE: no such image
		}
		st.out.Kernel.Args = strings.Join(args[2:], " ")
		for i := range st.out.Kernel.Alt { // whichever loads has the name
			if st.out.Kernel.Alt[i].Name == args[1] {
				st.out.Kernel.Alt[i].Args = st.out.Kernel.Args
			}
		}
		return true, false, nil
	case "boot":
		if st.out.Kernel.URL == "" {
			return false, false, nil // nothing selected: boot fails
		}
		return true, true, nil
	case "set":
		if len(args) < 2 {
			return false, false, nil
		}
		st.vars[args[1]] = strings.Join(args[2:], " ")
		return true, false, nil
	case "clear":
		if len(args) > 1 {
			delete(st.vars, args[1])
		}
		return true, false, nil
	case "isset":
		return len(args) > 1 && args[1] != "", false, nil
	case "iseq":
		return len(args) > 2 && args[1] == args[2], false, nil
	case "exit":
		return false, false, fmt.Errorf("%w: exit before boot", ErrScriptOp)
	}
	return quietCommands[args[0]], false, nil
}

// image reads "[--name N] [--autofree] [--replace] [--timeout T] URL args...".
func (st *scriptState) image(args []string) (Image, error) {
	var img Image
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "--name", "-n", "--timeout", "-t":
			if len(args) < 2 {
				return Image{}, fmt.Errorf("%w: %s needs a value", ErrScriptOp, args[0])
			}
			if args[0] == "--name" || args[0] == "-n" {
				img.Name = args[1]
			}
			args = args[1:]
		}
		args = args[1:]
	}
	if len(args) == 0 {
		return Image{}, fmt.Errorf("%w: no image URL", ErrScriptOp)
	}
	u, err := url.Parse(args[0])
	if err != nil {
		return Image{}, fmt.Errorf("%w: image URL %q: %v", ErrScriptOp, args[0], err)
	}
	if st.base != nil {
		u = st.base.ResolveReference(u)
	}
	img.URL = u.String()
	if img.Name == "" {
		img.Name = path.Base(u.Path) // iPXE names an image after its URI's path
	}
	img.Args = strings.Join(args[1:], " ")
	return img, nil
}

type chainPart struct {
	op  string // "", "||" or "&&": how this command joins the one before
	cmd string
}

func splitChain(line string) []chainPart {
	var parts []chainPart
	op := ""
	for {
		i, j := strings.Index(line, "||"), strings.Index(line, "&&")
		if i < 0 && j < 0 {
			return append(parts, chainPart{op, line})
		}
		if i < 0 || (j >= 0 && j < i) {
			i = j
		}
		parts = append(parts, chainPart{op, line[:i]})
		op, line = line[i:i+2], line[i+2:]
	}
}

// expand replaces ${name} and ${name:type} with the setting's value;
// of the types only hexhyp and hexraw change how a value prints.
func (st *scriptState) expand(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		name, typ, _ := strings.Cut(s[i+2:i+j], ":")
		v := st.vars[name]
		switch typ { // the MAC's other forms, as iPXE's setting types print it
		case "hexhyp":
			v = strings.ReplaceAll(v, ":", "-")
		case "hexraw":
			v = strings.ReplaceAll(v, ":", "")
		}
		b.WriteString(v)
		s = s[i+j+1:]
	}
}

// splitArgs splits on blanks; double or single quotes group words.
func splitArgs(s string) []string {
	var args []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote, in = c, true
		case quote == 0 && (c == ' ' || c == '\t'):
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		args = append(args, cur.String())
	}
	return args
}

func truncateText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
