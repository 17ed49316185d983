package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestImageVersions drives the version routes as an operator would: an
// import to test, a promote and a rollback with an operate token, a
// refused retire, a retire with admin; each step is in the audit trail
// with the token's name.
func TestImageVersions(t *testing.T) {
	blobs, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newImageEnv(t, blobs)
	tok := scopeTokens(t, e)
	if code, img, eb := e.put(t, "lab", []byte("version one")); code != http.StatusCreated || img.Version != 1 || img.Made == nil || img.Made.State != "production" {
		t.Fatalf("first import: %d %+v %+v", code, img, eb)
	}
	if code, img, eb := e.put(t, "lab?state=test", []byte("version two")); code != http.StatusOK || img.Version != 1 || img.Made.Version != 2 || img.Made.State != "test" {
		t.Fatalf("import to test: %d %+v %+v, want production still 1, version 2 made in test", code, img, eb)
	}
	var vl ImageVersionList
	e.mustDo(t, "GET", "/images/lab/versions", "", http.StatusOK, &vl)
	if len(vl.Versions) != 2 || !vl.Versions[0].Current || vl.Versions[1].State != "test" || vl.Versions[1].By != "api-token" {
		t.Fatalf("versions = %+v", vl.Versions)
	}
	var v ImageVersion
	if code, _ := e.do(t, "POST", "/images/lab/versions/2/promote", tok[inventory.ScopeOperate], "", &v); code != http.StatusOK || v.State != "production" {
		t.Fatalf("promote: %d %+v", code, v)
	}
	var img Image
	e.mustDo(t, "GET", "/images/lab", "", http.StatusOK, &img)
	if img.Version != 2 {
		t.Fatalf("after promote the image is at version %d, want 2", img.Version)
	}
	var eb ErrorBody
	if code, _ := e.do(t, "POST", "/images/lab/versions/2/retire", tok[inventory.ScopeOperate], "", &eb); code != http.StatusForbidden {
		t.Fatalf("retire with operate: %d %+v, want 403", code, eb)
	}
	if code, _ := e.do(t, "POST", "/images/lab/versions/2/retire", tok[inventory.ScopeAdmin], "", &eb); code != http.StatusConflict || !strings.Contains(eb.Error, "promote another version or roll back first") {
		t.Fatalf("retire of the current version: %d %+v, want 409 saying what to do", code, eb)
	}
	if code, _ := e.do(t, "POST", "/images/lab/rollback", tok[inventory.ScopeOperate], "", &v); code != http.StatusOK || v.Version != 2 || v.State != "test" {
		t.Fatalf("rollback: %d %+v, want version 2 back in test", code, v)
	}
	if code, _ := e.do(t, "POST", "/images/lab/versions/x/promote", tok[inventory.ScopeOperate], "", &eb); code != http.StatusBadRequest || eb.Field != "version" {
		t.Fatalf("promote of version x: %d %+v, want 400 about version", code, eb)
	}
	if code, _ := e.do(t, "POST", "/images/lab/versions/2/retire", tok[inventory.ScopeAdmin], "", &v); code != http.StatusOK || v.State != "retired" {
		t.Fatalf("retire: %d %+v", code, v)
	}
	var al AuditList
	e.mustDo(t, "GET", "/audit", "", http.StatusOK, &al)
	var trail []string
	for _, a := range al.Entries {
		if a.Status == http.StatusOK {
			trail = append(trail, a.Token+" "+strings.Fields(a.Summary)[0])
		}
	}
	want := "t-admin retire,t-operate rollback,t-operate promote,api-token version=2"
	if got := strings.Join(trail, ","); got != want {
		t.Fatalf("audit trail (newest first) %q, want %q", got, want)
	}
}
