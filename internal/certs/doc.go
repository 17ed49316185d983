// Package certs loads or makes the TLS certificate of bootfleet's
// management listener (the API and the dashboard, http.tls): an admin's
// certificate and key, or a self-signed ECDSA one made at first start and
// kept in the data directory. It also names a certificate by its SHA-256
// fingerprint, which is how an admin checks the one a client was given.
package certs
