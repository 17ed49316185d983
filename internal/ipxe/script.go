package ipxe

import (
	"fmt"
	"path"
	"strings"
	"text/template"
)

// Vars are the fields a profile's cmdline template can use, e.g.
// "console=ttyS0 done={{ .DoneURL }}".
type Vars struct {
	MAC      string // 52:54:00:12:34:56
	Name     string // machine name, empty for unlisted machines
	Profile  string
	ServerIP string
	HTTPBase string // http://10.0.0.1:8080
	DoneURL  string // the URL the booted OS calls to report boot complete
	// Root is the machine's diskless root for this boot,
	// nbd:SERVER_IP:PORT:EXPORT, or empty when its profile has no root.
	// The script appends bootfleet.root=ROOT to the command line by
	// itself unless the template already uses {{ .Root }}.
	Root string
}

// RenderCmdline executes the cmdline template with v. Unknown fields are an
// error, so a typo in a profile is reported rather than booted.
func RenderCmdline(tmpl string, v Vars) (string, error) {
	t, err := template.New("cmdline").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("cmdline template: %w", err)
	}
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		return "", fmt.Errorf("cmdline template: %w", err)
	}
	if strings.ContainsAny(b.String(), "\r\n") {
		return "", fmt.Errorf("cmdline template: rendered command line must be one line, got %q", b.String())
	}
	return b.String(), nil
}

// Initrd is one initrd image of a boot.
type Initrd struct {
	URL string
	// Alt are URLs of the same file on other servers, tried in order
	// when URL fails.
	Alt []string
	// Name is what the kernel sees it as; defaults to the URL's base name.
	Name string
}

// Boot is what a script loads and boots.
type Boot struct {
	Kernel    string   // URL
	KernelAlt []string // the kernel on other servers, tried in order when Kernel fails
	Initrds   []Initrd
	Cmdline   string // already rendered
	// UKI, if set, is the URL of a unified kernel image of Kernel and
	// Initrds (package uki) that UEFI machines load first, alone: see
	// Script.
	UKI string
}

// Script renders an iPXE script that loads the kernel and initrds and boots.
//
// Every initrd gets an explicit name, and the command line names each one
// with initrd=NAME: Debian 12's iPXE on UEFI hands an initrd to the kernel's
// EFI stub only when the command line names it, and BIOS kernels ignore the
// parameter, so always adding it is safe. A file with alternatives is
// fetched from the next one when one fails (iPXE runs the command after
// || only when the one before failed). On failure of every alternative
// the script waits and retries rather than dropping to a shell nobody
// watches.
//
// With a UKI, a UEFI iPXE (${platform} efi) loads it with the command line
// and boots it, and nothing else: systemd-stub hands the kernel its
// .initrd itself, an initrd loaded beside it would make a newer iPXE
// offer a second LINUX_INITRD_MEDIA device that stub 252 refuses, and
// initrd= would name a file the kernel never gets. BIOS, and a UEFI
// machine whose UKI fetch or boot fails, go on to the kernel and initrds
// after freeing what the UKI attempt left loaded.
func Script(b Boot) string {
	names := initrdNames(b.Initrds)
	var args []string
	for _, n := range names {
		args = append(args, "initrd="+n)
	}
	if b.Cmdline != "" {
		args = append(args, b.Cmdline)
	}
	var s strings.Builder
	s.WriteString("#!ipxe\n")
	s.WriteString(":start\n")
	if b.UKI != "" {
		s.WriteString("iseq ${platform} efi || goto plain\n")
		fmt.Fprintf(&s, "kernel %s || goto plain\n", strings.Join(append([]string{b.UKI}, withoutInitrd(b.Cmdline)...), " "))
		s.WriteString("boot || goto plain\n")
		s.WriteString(":plain\n")
		s.WriteString("imgfree\n")
	}
	line := strings.Join(args, " ")
	for _, u := range append([]string{b.Kernel}, b.KernelAlt...) {
		fmt.Fprintf(&s, "kernel %s %s || ", u, line)
	}
	s.WriteString("goto failed\n")
	for i, rd := range b.Initrds {
		for _, u := range append([]string{rd.URL}, rd.Alt...) {
			fmt.Fprintf(&s, "initrd --name %s %s || ", names[i], u)
		}
		s.WriteString("goto failed\n")
	}
	s.WriteString("boot || goto failed\n")
	s.WriteString(":failed\n")
	s.WriteString("echo bootfleet: boot failed, retrying in 5 seconds\n")
	s.WriteString("sleep 5\n")
	s.WriteString("goto start\n")
	return s.String()
}

// withoutInitrd is cmdline's words less initrd=: a UKI's initrd is its
// own, never a file named on the command line.
func withoutInitrd(cmdline string) []string {
	var words []string
	for _, w := range strings.Fields(cmdline) {
		if !strings.HasPrefix(w, "initrd=") {
			words = append(words, w)
		}
	}
	return words
}

// initrdNames gives each initrd a distinct name made only of characters
// that survive the kernel command line.
func initrdNames(rds []Initrd) []string {
	names := make([]string, len(rds))
	used := map[string]bool{}
	for i, rd := range rds {
		n := rd.Name
		if n == "" {
			u := rd.URL
			if j := strings.IndexAny(u, "?#"); j >= 0 {
				u = u[:j]
			}
			n = path.Base(u)
		}
		n = sanitize(n)
		if n == "" || n == "." || n == "/" {
			n = "initrd"
		}
		if used[n] {
			n = fmt.Sprintf("%d-%s", i, n)
		}
		used[n] = true
		names[i] = n
	}
	return names
}

func sanitize(n string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, n)
}
