package imagepeer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxSkew is how far a request's time may be from the serving server's
// clock. The servers' clocks must agree to within it (NTP does); the
// fleet's heartbeats need the same.
const MaxSkew = 2 * time.Minute

// scheme names the Authorization header's scheme:
//
//	Authorization: BootfleetPeer NAME:UNIX-SECONDS:HEX-HMAC
//
// Server names hold no colon (inventory.ValidServerName), so the three
// fields split unambiguously.
const scheme = "BootfleetPeer"

// ErrAuth is wrapped by every refusal of a request's credentials.
var ErrAuth = errors.New("imagepeer: peer authentication failed")

// mac is the signature of server asking for content sha at unix time t.
func mac(secret []byte, server string, t int64, sha string) string {
	h := hmac.New(sha256.New, secret)
	fmt.Fprintf(h, "bootfleet image peer v1\n%s\n%d\n%s", server, t, sha)
	return hex.EncodeToString(h.Sum(nil))
}

// Sign returns the Authorization header value with which server asks for
// content sha at now.
func Sign(secret []byte, server, sha string, now time.Time) string {
	t := now.Unix()
	return scheme + " " + server + ":" + strconv.FormatInt(t, 10) + ":" + mac(secret, server, t, sha)
}

// Verify checks the Authorization header value auth of a request for
// content sha at now, and returns the name of the server that signed it.
// Errors wrap ErrAuth and say what was wrong, for the serving server's
// log.
func Verify(secret []byte, auth, sha string, now time.Time) (string, error) {
	rest, ok := strings.CutPrefix(auth, scheme+" ")
	if !ok {
		return "", fmt.Errorf("%w: want an Authorization header %q, got %.40q", ErrAuth, scheme+" NAME:TIME:HMAC", auth)
	}
	f := strings.Split(rest, ":")
	if len(f) != 3 {
		return "", fmt.Errorf("%w: want NAME:TIME:HMAC after %s, got %d fields", ErrAuth, scheme, len(f))
	}
	t, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || strconv.FormatInt(t, 10) != f[1] {
		return f[0], fmt.Errorf("%w: want a time in Unix seconds, got %.20q", ErrAuth, f[1])
	}
	if d := now.Sub(time.Unix(t, 0)); d > MaxSkew || d < -MaxSkew {
		return f[0], fmt.Errorf("%w: signed at %s, %s from this server's clock; want within %s (check NTP on both servers)",
			ErrAuth, time.Unix(t, 0).UTC().Format(time.RFC3339), d.Round(time.Second), MaxSkew)
	}
	if !hmac.Equal([]byte(f[2]), []byte(mac(secret, f[0], t, sha))) {
		return f[0], fmt.Errorf("%w: the signature does not match this fleet's secret for content %.12s (a server of another fleet, or not a server)", ErrAuth, sha)
	}
	return f[0], nil
}
