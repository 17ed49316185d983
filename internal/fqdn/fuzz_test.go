package fqdn

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds both decoders; a name either decoder accepts must
// encode back to what it came from (wire forms), so nothing is lost or
// invented between the client's option and the server's answer.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if o, err := DecodeV6(b); err == nil && o.Name != "" && validLabels(o.Name) {
			if got := encodeName(o.Name, o.Partial); !bytes.Equal(got, b[1:]) {
				t.Fatalf("v6 %x decoded to %+v, which encodes to %x", b, o, got)
			}
		}
		if o, err := DecodeV4(b); err == nil && o.Flags&FlagE != 0 && o.Name != "" && validLabels(o.Name) {
			if got := encodeName(o.Name, o.Partial); !bytes.Equal(got, b[3:]) {
				t.Fatalf("v4 %x decoded to %+v, which encodes to %x", b, o, got)
			}
		}
	})
}

// validLabels excludes names with empty labels, which the wire form can
// hold only as a root label.
func validLabels(name string) bool {
	for _, l := range bytes.Split([]byte(name), []byte(".")) {
		if len(l) == 0 {
			return false
		}
	}
	return true
}
