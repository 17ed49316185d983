package imagepeer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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
	Size int64 // bytes the peer said it sends
	// Parent is set when the body is a layer over that content (see
	// LayerHeader), not the content whole.
	Parent string
}

// Open asks the peer whose HTTP base URL is base (http://10.0.0.2:8080)
// for content sha. An error says which URL answered what. Cancelling ctx
// ends the transfer; so does Idle without a byte.
func (c *Client) Open(ctx context.Context, base, sha string) (*Body, error) {
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
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("imagepeer: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel(nil)
		return nil, fmt.Errorf("imagepeer: GET %s: want 200 and the content, got %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	if resp.ContentLength < 0 {
		resp.Body.Close()
		cancel(nil)
		return nil, fmt.Errorf("imagepeer: GET %s: want a Content-Length, got none", url)
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
	return &Body{ReadCloser: b, Size: resp.ContentLength, Parent: parent}, nil
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
