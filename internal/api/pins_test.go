package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/imagestore"
)

// TestPinRefused: a profile or machine that pins a version its image
// cannot boot is refused when it is set, naming the versions there are.
func TestPinRefused(t *testing.T) {
	blobs, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newImageEnv(t, blobs)
	e.put(t, "lab", []byte("version one"))
	e.put(t, "lab?state=test", []byte("version two"))
	e.put(t, "lab?state=test", []byte("version three"))
	e.mustDo(t, "POST", "/images/lab/versions/3/retire", "", http.StatusOK, nil)
	e.mustDo(t, "POST", "/profiles", `{"name":"lab","kernel":"/vmlinuz","root_image":"lab"}`, http.StatusCreated, nil)
	e.mustDo(t, "POST", "/profiles", `{"name":"bare","kernel":"/vmlinuz"}`, http.StatusCreated, nil)
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1","profile":"lab"}`, http.StatusCreated, nil)
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:02","name":"pc2","profile":"bare"}`, http.StatusCreated, nil)
	const versions = "1 (production), 2 (test), 3 (retired)"
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     []string // in the error
	}{
		{"profile pins a missing version", "POST", "/profiles", `{"name":"p7","kernel":"/k","root_image":"lab","root_channel":"7"}`,
			http.StatusBadRequest, []string{"image lab has no version 7", versions}},
		{"profile pins a retired version", "POST", "/profiles", `{"name":"p3","kernel":"/k","root_image":"lab","root_channel":"3"}`,
			http.StatusBadRequest, []string{"version 3 is retired", "1 (production), 2 (test)"}},
		{"profile pins a version of an image not imported", "POST", "/profiles", `{"name":"px","kernel":"/k","root_image":"nosuch","root_channel":"1"}`,
			http.StatusBadRequest, []string{"image nosuch is not imported", "bootfleet image import nosuch"}},
		{"profile set to a missing version", "PUT", "/profiles/lab", `{"kernel":"/vmlinuz","root_image":"lab","root_channel":"4"}`,
			http.StatusBadRequest, []string{"no version 4", versions}},
		{"machine added pinning a missing version", "POST", "/machines", `{"mac":"52:54:00:00:00:03","profile":"lab","root_channel":"9"}`,
			http.StatusBadRequest, []string{"no version 9", versions}},
		{"machine set to a missing version", "PATCH", "/machines/pc1", `{"root_channel":"5"}`,
			http.StatusBadRequest, []string{"no version 5", versions}},
		{"machine moved to a profile without its version", "PATCH", "/machines/pc1", `{"root_channel":"2","profile":"bare"}`,
			http.StatusBadRequest, []string{"profile bare has no root image"}},
		{"machine of a profile without a root image", "PATCH", "/machines/pc2", `{"root_channel":"1"}`,
			http.StatusBadRequest, []string{"profile bare has no root image"}},
		{"profile pins a test version", "POST", "/profiles", `{"name":"p2","kernel":"/k","root_image":"lab","root_channel":"2"}`, http.StatusCreated, nil},
		{"profile follows test", "PUT", "/profiles/lab", `{"kernel":"/vmlinuz","root_image":"lab","root_channel":"test"}`, http.StatusOK, nil},
		{"machine pins production's version", "PATCH", "/machines/pc1", `{"root_channel":"1"}`, http.StatusOK, nil},
		{"machine follows its profile again", "PATCH", "/machines/pc1", `{"root_channel":""}`, http.StatusOK, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var eb ErrorBody
			code, _ := e.do(t, tc.method, tc.path, bearer, tc.body, &eb)
			if code != tc.status {
				t.Fatalf("%s %s %s: %d %+v, want %d", tc.method, tc.path, tc.body, code, eb, tc.status)
			}
			if tc.want != nil && eb.Field != "root_channel" {
				t.Errorf("error field %q, want root_channel", eb.Field)
			}
			for _, w := range tc.want {
				if !strings.Contains(eb.Error, w) {
					t.Errorf("error %q lacks %q", eb.Error, w)
				}
			}
		})
	}
}
