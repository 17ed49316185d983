package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Handler serves the dashboard at / and its assets under /ui/.
func Handler() http.Handler {
	sub, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	index, _ := fs.ReadFile(sub, "index.html")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// The page only talks to this server.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			w.Write(index)
			return
		}
		files.ServeHTTP(w, r)
	})
}
