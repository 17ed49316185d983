package ndp

import (
	"bytes"
	"testing"
)

// FuzzParse: Parse never panics, and what it accepts re-encodes to bytes
// that parse to the same encoding (options are canonical once padded).
// Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(Advertisement(clientMAC).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		enc := m.Marshal()
		back, err := Parse(enc)
		if err != nil {
			t.Fatalf("re-encoding %x does not parse: %v", enc, err)
		}
		if !bytes.Equal(back.Marshal(), enc) {
			t.Fatalf("encoding not stable: %x then %x", enc, back.Marshal())
		}
	})
}
