package grub

import (
	"errors"
	"fmt"
	"strings"
)

// Stage1Paths are where grubnetx64.efi looks for its config, relative to
// the server root: its embedded prefix is /grub.
var Stage1Paths = []string{"grub/x86_64-efi/grub.cfg", "grub/grub.cfg"}

// Stage1ARM64Path is where grubnetaa64.efi, the arm64 build, looks first.
const Stage1ARM64Path = "grub/arm64-efi/grub.cfg"

// ModuleLists are the lists grub's normal mode reads from its prefix to
// load modules on demand (commands, file systems, ciphers, terminals).
// The signed grubnetx64 and grubnetaa64 have what they need built in and
// under Secure Boot may load no module, so they are served empty: same as
// missing, minus a refused request for each at every boot.
var ModuleLists = []string{"grub/x86_64-efi/command.lst", "grub/x86_64-efi/fs.lst",
	"grub/x86_64-efi/crypto.lst", "grub/x86_64-efi/terminal.lst",
	"grub/arm64-efi/command.lst", "grub/arm64-efi/fs.lst",
	"grub/arm64-efi/crypto.lst", "grub/arm64-efi/terminal.lst"}

// Stage1 is the config at Stage1Paths for every machine: it loads
// $prefix/MAC/grub.cfg, MAC as grub writes $net_default_mac
// (52:54:00:12:34:56), from the server and protocol grub came from. An
// arm64 grub loads $prefix/MAC/arm64/grub.cfg instead: Debian 12's
// grubnetaa64 reads this same grub.cfg, and grub's own $grub_cpu is what
// says which kernel it can boot, so it never gets an x86_64 one.
const Stage1 = "# bootfleet: every machine continues with its own config, for its CPU\n" +
	"if [ \"${grub_cpu}\" = \"arm64\" ]; then\n" +
	"\tconfigfile $prefix/${net_default_mac}/arm64/grub.cfg\n" +
	"fi\n" +
	"configfile $prefix/${net_default_mac}/grub.cfg\n"

// Stage1ARM64 is the config at Stage1ARM64Path, for an arm64 grub that
// reads its architecture's directory first: its machine's arm64 config.
const Stage1ARM64 = "# bootfleet: every arm64 machine continues with its own config\n" +
	"configfile $prefix/${net_default_mac}/arm64/grub.cfg\n"

// Machine is what one machine's config loads and boots.
//
// Kernel, Initrds and MilestoneBase are absolute paths on the server grub
// came from ($root), fetched with the protocol grub came by. Debian 12's
// signed grubnetx64 has no http module built in (and Secure Boot forbids
// loading one), so after PXE that is TFTP.
type Machine struct {
	Kernel  string
	Initrds []string
	Cmdline string // already rendered, one line
	// MilestoneBase is the path under which the config reports its steps,
	// e.g. /grub/52-54-00-12-34-56/milestone: NAME is appended, and the
	// answer must be a valid grub script (a comment).
	MilestoneBase string
}

// Milestones the machine config reports.
const (
	MilestoneSecureBootOn  = "secure-boot-on"  // grub runs under lockdown: Secure Boot is enforcing
	MilestoneSecureBootOff = "secure-boot-off" // no lockdown: Secure Boot is off
	MilestoneKernelFailed  = "failed-grub-kernel"
	MilestoneInitrdFailed  = "failed-grub-initrd"
	MilestoneBootFailed    = "failed-grub-boot"
)

// ErrNotPath is wrapped when a file is not a path on grub's server.
var ErrNotPath = errors.New("grub fetches files only from the server it came from")

// Render returns the machine's grub.cfg. Grub sets $lockdown to y when
// it runs under Secure Boot (kern/lockdown.c), so the config reports the
// Secure Boot state first; it then loads the kernel and initrds and boots,
// and when grub refuses a file (under Secure Boot: a kernel not signed by
// a key shim trusts) it reports which step failed and reboots after 5 s
// rather than waiting at a prompt nobody sees.
func Render(m Machine) (string, error) {
	kernel, err := m.file(m.Kernel)
	if err != nil {
		return "", fmt.Errorf("kernel: %w", err)
	}
	rds := make([]string, len(m.Initrds))
	for i, rd := range m.Initrds {
		if rds[i], err = m.file(rd); err != nil {
			return "", fmt.Errorf("initrd %d: %w", i, err)
		}
	}
	if strings.ContainsAny(m.Cmdline, "\r\n") {
		return "", fmt.Errorf("command line must be one line, got %q", m.Cmdline)
	}
	var s strings.Builder
	s.WriteString("# bootfleet: this machine's boot, rendered for this boot only\n")
	s.WriteString("set timeout=0\n")
	if m.MilestoneBase != "" {
		s.WriteString("if [ \"${lockdown}\" = \"y\" ]; then\n")
		fmt.Fprintf(&s, "\t%s\n", m.report(MilestoneSecureBootOn))
		s.WriteString("else\n")
		fmt.Fprintf(&s, "\t%s\n", m.report(MilestoneSecureBootOff))
		s.WriteString("fi\n")
	}
	s.WriteString("echo 'bootfleet: loading the kernel'\n")
	fmt.Fprintf(&s, "if linux %s", kernel)
	for _, w := range strings.Fields(m.Cmdline) {
		s.WriteString(" " + quote(w))
	}
	s.WriteString("; then\n")
	if len(rds) > 0 {
		fmt.Fprintf(&s, "\tif initrd %s; then\n", strings.Join(rds, " "))
		s.WriteString("\t\tboot\n")
		fmt.Fprintf(&s, "\t\t%s\n", m.report(MilestoneBootFailed))
		s.WriteString("\telse\n")
		fmt.Fprintf(&s, "\t\t%s\n", m.report(MilestoneInitrdFailed))
		s.WriteString("\tfi\n")
	} else {
		s.WriteString("\tboot\n")
		fmt.Fprintf(&s, "\t%s\n", m.report(MilestoneBootFailed))
	}
	s.WriteString("else\n")
	fmt.Fprintf(&s, "\t%s\n", m.report(MilestoneKernelFailed))
	s.WriteString("fi\n")
	s.WriteString("echo 'bootfleet: boot failed, rebooting in 5 seconds'\n")
	s.WriteString("sleep 5\n")
	s.WriteString("reboot\n")
	return s.String(), nil
}

// report is a command that fetches MilestoneBase/name, or a no-op.
func (m Machine) report(name string) string {
	if m.MilestoneBase == "" {
		return "true"
	}
	return "source " + quote(strings.TrimRight(m.MilestoneBase, "/")+"/"+name)
}

// file quotes an absolute path on grub's server.
func (m Machine) file(s string) (string, error) {
	if !strings.HasPrefix(s, "/") {
		return "", fmt.Errorf("%w: want an absolute path on it, got %q", ErrNotPath, s)
	}
	return quote(s), nil
}

// quote makes s one grub word, taken literally: single quotes, with each
// single quote inside written as the sh idiom: close, escaped quote, open.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
