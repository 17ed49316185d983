package imagepeer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client fetches image content from peers.
type Client struct {
	// Self is the name this server signs with; required.
	Self string
	// Secret is the fleet's; required.
	Secret []byte
	// HTTP does the requests. Default: a client with no overall timeout
	// (an image takes as long as it takes) that gives up on a peer that
	// does not connect within 5 s or answer within 15 s.
	HTTP *http.Client
	// Idle is how long a transfer may go without a byte before it is
	// abandoned, so a stalled peer costs Idle, not the whole fetch.
	// Default 30 s.
	Idle time.Duration
	Now  func() time.Time // default time.Now
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 nil, // peers are on the servers' own network
	DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	ResponseHeaderTimeout: 15 * time.Second,
	IdleConnTimeout:       time.Minute,
}}

// Body is a transfer in progress: read it to the end, then close it.
type Body struct {
	io.ReadCloser
	Size int64 // bytes of the whole content, as the peer says
	// From is the byte of the content the body starts at: the from Open
	// asked for, or 0 when the peer sends the whole content instead.
	From   int64
	Parent string
}

// Open asks the peer whose HTTP base URL is base (http://10.0.0.2:8080)
// for content sha from byte from on (an HTTP Range request when from > 0,
// to resume a transfer that broke). An error says which URL answered
// what. Cancelling ctx ends the transfer; so does Idle without a byte.
func (c *Client) Open(ctx context.Context, base, sha string, from int64) (*Body, error) {
	url := strings.TrimSuffix(base, "/") + Prefix + "images/" + sha
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("imagepeer: peer URL %q: %w", url, err)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	req.Header.Set("Authorization", Sign(c.Secret, c.Self, sha, now()))
	if from > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("imagepeer: GET %s: %w", url, err)
	}
	fail := func(format string, args ...any) (*Body, error) {
		resp.Body.Close()
		cancel(nil)
		return nil, fmt.Errorf("imagepeer: GET %s: "+format, append([]any{url}, args...)...)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fail("want 200 or 206 and the content, got %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	if resp.ContentLength < 0 {
		return fail("want a Content-Length, got none")
	}
	body := &Body{Size: resp.ContentLength}
	if resp.StatusCode == http.StatusPartialContent {
		first, last, total, err := ParseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return fail("%w", err)
		}
		if first != from || last != total-1 || last-first+1 != resp.ContentLength {
			return fail("asked for bytes %d to the end, got bytes %d-%d of %d in %d bytes", from, first, last, total, resp.ContentLength)
		}
		body.Size, body.From = total, first
	}
	idle := c.Idle
	if idle <= 0 {
		idle = 30 * time.Second
	}
	b := &idleBody{rc: resp.Body, cancel: cancel, ctx: ctx, idle: idle}
	b.timer = time.AfterFunc(idle, b.expire)
	parent := resp.Header.Get(LayerHeader)
	if parent != "" && !shaRE.MatchString(parent) {
		b.Close()
		return nil, fmt.Errorf("imagepeer: GET %s: %s %q, want a sha256 of 64 lower-case hex digits", url, LayerHeader, parent)
	}
	body.ReadCloser, body.Parent = b, parent
	return body, nil
}

// ParseContentRange reads the Content-Range of a 206 answer to a request
// for one range (RFC 9110 section 14.4): "bytes FIRST-LAST/TOTAL", with
// FIRST <= LAST < TOTAL. The unsatisfied form (bytes */TOTAL) and unknown
// totals are errors: a resume needs to know what it got.
func ParseContentRange(v string) (first, last, total int64, err error) {
	bad := func(why string) (int64, int64, int64, error) {
		return 0, 0, 0, fmt.Errorf("Content-Range %q: %s; want bytes FIRST-LAST/TOTAL", v, why)
	}
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return bad("unit is not bytes")
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no /TOTAL")
	}
	f, l, ok := strings.Cut(rng, "-")
	if !ok {
		return bad("no FIRST-LAST")
	}
	num := func(s string) (int64, bool) {
		if s == "" || strings.TrimLeft(s, "0123456789") != "" || len(s) > 18 {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	var ok1, ok2, ok3 bool
	first, ok1 = num(f)
	last, ok2 = num(l)
	total, ok3 = num(tot)
	if !ok1 || !ok2 || !ok3 {
		return bad("FIRST, LAST and TOTAL must be decimal byte counts")
	}
	if first > last || last >= total {
		return bad("want FIRST <= LAST < TOTAL")
	}
	return first, last, total, nil
}

// idleBody ends the request when no byte has arrived for idle.
type idleBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration
	timer  *time.Timer
	once   sync.Once
}

func (b *idleBody) expire() {
	b.cancel(fmt.Errorf("imagepeer: no byte from the peer for %s", b.idle))
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.timer.Reset(b.idle)
	}
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); cause != nil {
			err = cause
		}
	}
	return n, err
}

func (b *idleBody) Close() error {
	var err error
	b.once.Do(func() {
		b.timer.Stop()
		err = b.rc.Close()
		b.cancel(nil)
	})
	return err
}
