package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// stream posts in and calls line for each line of a JSON-lines answer.
// The answer may take as long as the server's work does, so the client's
// overall timeout does not apply; instead the server must say something
// at least every idle, or the call fails rather than hang.
func (c *client) stream(ctx context.Context, path string, in any, idle time.Duration, line func([]byte) error) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	quiet := fmt.Errorf("the server said nothing for %s; the command may still run there (see bootfleet audit and the machines' events)", idle)
	timer := time.AfterFunc(idle, func() { cancel(quiet) })
	defer timer.Stop()
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause == quiet {
			return cause
		}
		return fmt.Errorf("%w (is bootfleet serve running there? set --server or BOOTFLEET_SERVER)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		e := &apiError{status: resp.StatusCode}
		if json.NewDecoder(resp.Body).Decode(&e.body) != nil || e.body.Error == "" {
			e.body.Error = "server answered " + resp.Status
		}
		return e
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		timer.Reset(idle)
		if err := line(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if cause := context.Cause(ctx); cause == quiet {
			return cause
		}
		return fmt.Errorf("read answer from %s: %w", c.base, err)
	}
	return nil
}
