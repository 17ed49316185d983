package identitysvc

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/bootfleet/bootfleet/internal/identity"
)

// rsaBits is the size of RSA host keys, as Debian's ssh-keygen -A makes.
const rsaBits = 3072

// NewHostKeys makes one key pair of each of identity.KeyTypes, in the
// OpenSSH formats sshd reads.
func NewHostKeys(comment string) ([]identity.HostKey, error) {
	var out []identity.HostKey
	for _, t := range identity.KeyTypes {
		var (
			priv crypto.Signer
			err  error
		)
		switch t {
		case identity.KeyEd25519:
			_, priv, err = ed25519.GenerateKey(rand.Reader)
		case identity.KeyECDSA:
			priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		case identity.KeyRSA:
			priv, err = rsa.GenerateKey(rand.Reader, rsaBits)
		}
		if err != nil {
			return nil, fmt.Errorf("identity: make %s host key: %w", t, err)
		}
		k, err := hostKey(t, priv, comment)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

func hostKey(t string, priv crypto.Signer, comment string) (identity.HostKey, error) {
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return identity.HostKey{}, fmt.Errorf("identity: encode %s host key: %w", t, err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return identity.HostKey{}, fmt.Errorf("identity: encode %s public key: %w", t, err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	return identity.HostKey{Type: t, Private: string(pem.EncodeToMemory(block)), Public: line}, nil
}

// Fingerprint is the SHA256 fingerprint of an authorized_keys line, as
// ssh-keygen -l prints it, or "" when the line does not parse.
func Fingerprint(public string) string {
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(public))
	if err != nil {
		return ""
	}
	return ssh.FingerprintSHA256(pub)
}
