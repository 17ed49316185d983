package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/api"
)

// TestWaitCommit: image commit follows the server's background commit
// until the version is test, and says what to do when it failed, when the
// server lost it, or when the version is gone.
func TestWaitCommit(t *testing.T) {
	running := &api.VersionCommit{Done: 10, Total: 100}
	for _, tc := range []struct {
		name    string
		answers [][]api.ImageVersion // one GET versions answer each
		want    string               // error; "" for the version in test
	}{
		{"stored", [][]api.ImageVersion{{{Version: 2, State: "maintenance", Commit: running}}, {{Version: 2, State: "test", SHA256: "ab"}}}, ""},
		{"failed", [][]api.ImageVersion{{{Version: 2, State: "maintenance", Commit: &api.VersionCommit{Error: "disk full"}}}},
			"the commit of image lab version 2 failed: disk full; the version stays in maintenance: run bootfleet image commit lab again"},
		{"lost", [][]api.ImageVersion{{{Version: 2, State: "maintenance"}}}, "the server commits nothing (did it restart?)"},
		{"gone", [][]api.ImageVersion{{{Version: 1, State: "production"}}}, "image lab has no version 2 any more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != api.Prefix+"/images/lab/versions" || n >= len(tc.answers) {
					http.Error(w, "unexpected "+r.URL.Path, http.StatusTeapot)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(api.ImageVersionList{Versions: tc.answers[n]})
				n++
			}))
			defer srv.Close()
			c := &client{base: srv.URL + api.Prefix, http: srv.Client()}
			v, err := c.waitCommit(context.Background(), api.ImageVersion{Image: "lab", Version: 2, State: "maintenance"})
			switch {
			case tc.want == "" && (err != nil || v.State != "test" || v.SHA256 != "ab"):
				t.Fatalf("waitCommit = %+v, %v; want version 2 in test", v, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("waitCommit: %v, want an error saying %q", err, tc.want)
			case n != len(tc.answers):
				t.Fatalf("asked %d times, want %d", n, len(tc.answers))
			}
		})
	}
}
