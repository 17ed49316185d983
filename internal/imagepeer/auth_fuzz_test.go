package imagepeer

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// FuzzVerify: any Authorization header either verifies as the one Sign
// makes for its name, time and content, or is refused with ErrAuth;
// never a panic. The seeds are in testdata/fuzz/FuzzVerify.
func FuzzVerify(f *testing.F) {
	key := bytes.Repeat([]byte{3}, 32)
	sha := fmt.Sprintf("%064x", 7)
	now := time.Unix(1_800_000_000, 0)
	f.Add(Sign(key, "boot-a", sha, now))
	f.Add(scheme + " boot-a:1800000000:00")
	f.Fuzz(func(t *testing.T, auth string) {
		name, err := Verify(key, auth, sha, now)
		if err != nil {
			return
		}
		var ts int64
		if _, serr := fmt.Sscanf(auth[len(scheme)+1+len(name)+1:], "%d", &ts); serr != nil {
			t.Fatalf("Verify(%q) accepted a header without a time after the name %q", auth, name)
		}
		if want := Sign(key, name, sha, time.Unix(ts, 0)); auth != want {
			t.Fatalf("Verify(%q) accepted it as %q, but Sign makes %q", auth, name, want)
		}
	})
}
