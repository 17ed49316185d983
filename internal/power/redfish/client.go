package redfish

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// client talks to one BMC over HTTPS with HTTP basic authentication,
// which every Redfish service accepts; sessions would save a round trip
// per call at the cost of a logout to get right.
type client struct {
	base       string // https://host[:port]
	user, pass string
	http       *http.Client
}

func newClient(host, user, pass string, insecure bool, rt http.RoundTripper) *client {
	if rt == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if insecure {
			tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		}
		rt = tr
	}
	base := host
	if !strings.Contains(base, "://") {
		base = "https://" + host
	}
	// No redirects: one could carry the credentials to another host.
	return &client{base: strings.TrimSuffix(base, "/"), user: user, pass: pass, http: &http.Client{Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) get(ctx context.Context, path string) ([]byte, error) {
	return c.do(ctx, http.MethodGet, path, nil)
}

func (c *client) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodPost, path, b)
	return err
}

func (c *client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.user, c.pass)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ce *tls.CertificateVerificationError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("redfish %s: the BMC's certificate is not trusted (%v); set insecure for a self-signed one", c.base, ce.Err)
		}
		return nil, fmt.Errorf("redfish %s: no answer from the BMC; check its address and that HTTPS is reachable: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("redfish %s %s: read answer: %w", method, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("redfish %s: the BMC refused user %q (%s): wrong user or password (set them with bootfleet machine power)", c.base, c.user, resp.Status)
	case resp.StatusCode >= 300:
		return nil, fmt.Errorf("redfish %s %s: the BMC answered %s: %.200s", method, path, resp.Status, b)
	}
	return b, nil
}
