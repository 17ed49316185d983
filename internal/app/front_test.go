package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// TestFrontHandlerRoutes: the API takes everything under /api/v1, boots
// included, and the boot handler everything that is not the API, metrics
// or the dashboard.
func TestFrontHandlerRoutes(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name+" "+r.URL.Path) })
	}
	srv := httptest.NewServer(frontHandler(telemetry.New(telemetry.Config{}), named("api"), named("boot")))
	defer srv.Close()
	tests := []struct{ method, path, want string }{
		{"GET", "/api/v1", "api /api/v1"},
		{"GET", "/api/v1/machines", "api /api/v1/machines"},
		{"POST", "/api/v1/machines", "api /api/v1/machines"},
		{"GET", "/api/v1/boots/x", "api /api/v1/boots/x"},
		{"GET", "/ipxe/52-54-00-00-00-02", "boot /ipxe/52-54-00-00-00-02"},
		{"POST", "/done/52-54-00-00-00-02", "boot /done/52-54-00-00-00-02"},
		{"GET", "/api/v10", "boot /api/v10"},
		{"GET", "/metrics", "# HELP"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), tt.want) {
				t.Fatalf("answered %q, want %q", b, tt.want)
			}
		})
	}
}
