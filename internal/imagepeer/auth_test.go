package imagepeer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	sha := fmt.Sprintf("%064x", 42)
	now := time.Unix(1_800_000_000, 0)
	good := Sign(key, "boot-a", sha, now)
	tests := []struct {
		name, auth, sha string
		at              time.Time
		want            string // in the error; "" for none
	}{
		{"good", good, sha, now, ""},
		{"good within skew", good, sha, now.Add(MaxSkew - time.Second), ""},
		{"too old", good, sha, now.Add(MaxSkew + time.Second), "check NTP"},
		{"from the future", good, sha, now.Add(-MaxSkew - time.Second), "check NTP"},
		{"other content", good, fmt.Sprintf("%064x", 43), now, "does not match"},
		{"other secret", Sign(bytes.Repeat([]byte{2}, 32), "boot-a", sha, now), sha, now, "does not match"},
		{"other name", strings.Replace(good, "boot-a", "boot-b", 1), sha, now, "does not match"},
		{"no header", "", sha, now, "want an Authorization header"},
		{"bearer", "Bearer abc", sha, now, "want an Authorization header"},
		{"two fields", scheme + " boot-a:1", sha, now, "got 2 fields"},
		{"bad time", scheme + " boot-a:x:00", sha, now, "Unix seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, err := Verify(key, tt.auth, tt.sha, tt.at)
			if tt.want == "" {
				if err != nil || name != "boot-a" {
					t.Fatalf("Verify = %q, %v; want boot-a, nil", name, err)
				}
				return
			}
			if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify error = %v, want ErrAuth saying %q", err, tt.want)
			}
		})
	}
}
