package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/certs"
)

// Defaults for finding the server. The token falls back to the data
// directory's api-token file, so root on the server needs no flags at all.
const (
	defaultServer = "http://127.0.0.1:8080"
	defaultData   = "/var/lib/bootfleet"
	// defaultTLSServer is the default with --ca: the server's own
	// management listener (http.tls.listen's default).
	defaultTLSServer = "https://127.0.0.1:8443"
)

// clientOpts are the flags every API command shares.
type clientOpts struct {
	server, token, data, output, ca string
}

func (o *clientOpts) register(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	o.connFlags(f.StringVar)
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
}

// connFlags declares the flags that find the server and the token, for
// commands with an --output of their own (storm).
func (o *clientOpts) connFlags(str func(p *string, name, value, usage string)) {
	str(&o.server, "server", "", "API server URL (default $BOOTFLEET_SERVER or "+defaultServer+")")
	str(&o.token, "token", "", "API token (default $BOOTFLEET_TOKEN or the api-token file in --data)")
	str(&o.data, "data", defaultData, "the server's data directory, to read its api-token file")
	str(&o.ca, "ca", "", "PEM CA certificate that verifies an https:// server, e.g. its DATA/"+certs.CertFile+
		" with http.tls.self_signed (default $BOOTFLEET_CA, else the system's CAs)")
}

// client is a small client of the bootfleet API.
type client struct {
	base  string // e.g. http://10.0.0.1:8080/api/v1
	token string
	http  *http.Client
}

func (o *clientOpts) client() (*client, error) {
	if o.output != "table" && o.output != "json" {
		return nil, fmt.Errorf("--output: want table or json, got %q", o.output)
	}
	ca := firstOf(o.ca, os.Getenv("BOOTFLEET_CA"))
	def := defaultServer
	if ca != "" {
		def = defaultTLSServer
	}
	server := firstOf(o.server, os.Getenv("BOOTFLEET_SERVER"), def)
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--server: want a URL like http://10.0.0.1:8080 or https://10.0.0.1:8443, got %q", server)
	}
	tr, err := transport(u, ca)
	if err != nil {
		return nil, err
	}
	tok := firstOf(o.token, os.Getenv("BOOTFLEET_TOKEN"))
	if tok == "" {
		// No token is fine if the server opened reads; writes will say so.
		tok, _ = api.ReadToken(filepath.Join(o.data, api.TokenFile))
	}
	return &client{base: strings.TrimSuffix(server, "/") + api.Prefix, token: tok,
		http: &http.Client{Timeout: 30 * time.Second, Transport: tr}}, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// apiError is an error answer from the server.
type apiError struct {
	status int
	body   api.ErrorBody
}

func (e *apiError) Error() string {
	msg := e.body.Error
	if e.body.Field != "" {
		msg = e.body.Field + ": " + msg
	}
	if e.status == http.StatusUnauthorized {
		msg += "; pass --token, set BOOTFLEET_TOKEN, or point --data at the server's data directory"
	}
	return msg
}

// do sends in (if non-nil) as JSON and decodes the answer into out (if
// non-nil). Non-2xx answers become *apiError.
func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	if in == nil {
		return c.send(ctx, method, path, nil, 0, "", out)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.send(ctx, method, path, bytes.NewReader(b), int64(len(b)), "application/json", out)
}

// send is do with a ready body of size bytes and its content type.
func (c *client) send(ctx context.Context, method, path string, body io.Reader, size int64, ctype string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if untrusted(err) {
			return fmt.Errorf("the server's certificate is not trusted: %w; pass --ca FILE or set BOOTFLEET_CA to the CA that signed it "+
				"(with http.tls.self_signed, the server's DATA/%s; compare its fingerprint with bootfleet check on the server)", err, certs.CertFile)
		}
		return fmt.Errorf("%w (is bootfleet serve running there? set --server or BOOTFLEET_SERVER)", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("read answer from %s: %w", c.base, err)
	}
	if resp.StatusCode >= 300 {
		e := &apiError{status: resp.StatusCode}
		if json.Unmarshal(b, &e.body) != nil || e.body.Error == "" {
			e.body.Error = fmt.Sprintf("server answered %s: %.200q", resp.Status, b)
		}
		return e
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("server answer is not the JSON expected (%w); is %s a bootfleet server?", err, c.base)
	}
	return nil
}

// pathKey escapes a MAC or name for the URL path.
func pathKey(s string) string { return url.PathEscape(s) }

var errNoChange = errors.New("nothing to change; give at least one of the flags")

// withQuery is path with q appended when q has any value.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// sinceLimit sets the since and limit parameters of the list commands
// that have them; since is checked here, so a typo fails before any
// request.
func sinceLimit(q url.Values, since string, limit int) error {
	if since != "" {
		if _, err := api.ParseSince(since, now()); err != nil {
			return fmt.Errorf("--since: %w", err)
		}
		q.Set("since", since)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return nil
}
