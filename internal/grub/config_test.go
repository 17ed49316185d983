package grub

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

var update = os.Getenv("UPDATE_TESTDATA") != ""

func TestRenderGolden(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    Machine
	}{
		{"signed", Machine{Kernel: "/profiles/sb/kernel", Initrds: []string{"/profiles/sb/initrd/0/initrd.img"},
			Cmdline: "console=ttyS0 done=http://10.0.0.1:8080/done/52-54-00-12-34-56", MilestoneBase: "/grub/52-54-00-12-34-56/milestone"}},
		{"no-initrd-no-milestones", Machine{Kernel: "/profiles/k/kernel", Cmdline: "quiet"}},
		// A quote in the command line stays one literal word.
		{"quoting", Machine{Kernel: "/profiles/q/kernel", Cmdline: "a='b c' $x;reboot"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".cfg")
			if update {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (UPDATE_TESTDATA=1 writes it)", err)
			}
			if got != string(want) {
				t.Errorf("Render =\n%s\nwant (%s)\n%s", got, golden, want)
			}
		})
	}
}

func TestRenderRefuses(t *testing.T) {
	if _, err := Render(Machine{Kernel: "http://mirror/vmlinuz"}); !errors.Is(err, ErrNotPath) {
		t.Errorf("URL kernel: %v, want ErrNotPath", err)
	}
	if _, err := Render(Machine{Kernel: "/k", Initrds: []string{"rd"}}); !errors.Is(err, ErrNotPath) {
		t.Errorf("relative initrd: %v, want ErrNotPath", err)
	}
	if _, err := Render(Machine{Kernel: "/k", Cmdline: "a\nreboot"}); err == nil {
		t.Error("a command line of two lines was rendered")
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{"a": "'a'", "it's": `'it'\''s'`, "$x": "'$x'", "": "''"} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
}
