package diskless

import (
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/readorder"
)

// ReadOrderPath is the HTTP route, followed by a content's sha256, where
// an agent reads the order in which earlier boots read that content
// (readorder's file), to ask the group for what its boot reads next.
const ReadOrderPath = "/nbd/read-order/"

// The server learns a content's read order from what boots read of it:
// the NBD reads of its exports (the direct path, and what an agent's
// proxy fills by unicast) and the multicast requests that are neither
// repairs nor read-ahead. Both are what a machine actually read, in the
// order it read it; learning from NBD alone would miss every multicast
// boot, and from the group alone every unicast one.

// learningExport notes the chunks an export's reads touch.
type learningExport struct {
	nbd.Export
	sha   string
	order *readorder.Learner
}

func (e learningExport) note(off int64, n int) {
	if n > 0 && off >= 0 {
		e.order.Note(e.sha, uint32(off/chunkwire.ChunkSize), uint32((off+int64(n)-1)/chunkwire.ChunkSize))
	}
}

func (e learningExport) ReadNow(p []byte, off int64, files bool) (nbd.Span, bool) {
	s, ok := e.Export.ReadNow(p, off, files)
	if ok {
		e.note(off, len(p))
	}
	return s, ok
}

func (e learningExport) ReadSpan(p []byte, off int64) (nbd.Span, error) {
	e.note(off, len(p))
	return e.Export.ReadSpan(p, off)
}

// learning wraps x, the export named name, to learn its content's read
// order; x as it is when multicast is off.
func (s *Service) learning(name string, x nbd.Export) nbd.Export {
	if s.order == nil {
		return x
	}
	sha := s.disks.ContentOf(name)
	if sha == "" {
		return x
	}
	return learningExport{Export: x, sha: sha, order: s.order}
}

// SetOrderURL says where agents read a content's read order: this
// server's ReadOrderPath. Call it before Serve.
func (s *Service) SetOrderURL(url string) {
	if s.mc != nil {
		s.mc.cfg.OrderURL = strings.TrimSuffix(url, "/") + "/"
	}
}

// ReadOrderHandler serves ReadOrderPath: the read order of the content
// the path names, 404 while no boot of it was seen.
func (s *Service) ReadOrderHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sha := strings.TrimPrefix(r.URL.Path, ReadOrderPath)
		if _, err := hex.DecodeString(sha); err != nil || len(sha) != 64 {
			http.Error(w, "want "+ReadOrderPath+"SHA256, the content's 64 hex digits", http.StatusBadRequest)
			return
		}
		var b []byte
		ok := false
		if s.order != nil {
			b, ok = s.order.Order(sha)
		}
		if !ok {
			http.Error(w, "no boot of this content seen yet", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})
}
