package web

import (
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestAssets(t *testing.T) {
	h := Handler()
	for _, tc := range []struct{ path, ctype, has string }{
		{"/", "text/html", `<table id="fleet">`},
		{"/ui/app.js", "javascript", "setInterval(refresh, 2000)"},
		{"/", "text/html", `<table id="servers">`},
		{"/ui/app.js", "javascript", `call("GET", "/servers")`},
		{"/ui/app.css", "text/css", "#timeline"},
		{"/", "text/html", `<table id="images">`},
		{"/ui/app.js", "javascript", `call("GET", "/images")`},
		{"/", "text/html", `<table id="versions">`},
		{"/ui/app.js", "javascript", `"/versions")`},
		{"/", "text/html", `<table id="storm-machines"`},
		{"/", "text/html", `<script src="/ui/storm.js"></script>
<script src="/ui/app.js"></script>`}, // app.js's first poll renders the storm view
		{"/ui/storm.js", "javascript", "function renderRootIO("},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Type"), tc.ctype) || !strings.Contains(string(body), tc.has) {
				t.Fatalf("GET %s: %d %q, want 200 %s containing %q", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.ctype, tc.has)
			}
			// No CDN: the page must work on an isolated boot LAN.
			if m := regexp.MustCompile(`(src|href)=["']?(https?:)?//`).FindString(string(body)); m != "" {
				t.Errorf("%s loads something from another host: %s", tc.path, m)
			}
		})
	}
}
