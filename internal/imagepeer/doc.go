// Package imagepeer is how the servers of a fleet hand each other image
// content: GET /peer/v1/images/SHA256 on a server's plain HTTP listener
// (the one firmware uses, which every server has), answered from the
// image store with http.ServeContent, so ranges and HEAD work and the
// size is always sent. Client.Open resumes a broken transfer with a
// Range request (bytes=FROM-) and checks the 206's Content-Range.
//
// Root images are the fleet's disks, so a machine on the boot LAN must
// not read them this way. Every request carries an HMAC-SHA256 of the
// asking server's name, the time and the content's hash, keyed with a
// secret the servers share through their store (inventory.Secrets):
// servers that share a store need no setup to trust each other, and
// anyone who can read the store can read the images anyway. API tokens
// were the other choice; they would need an admin to hand each server a
// token, and the API may be on HTTPS only (http.tls) where a peer would
// also need the certificate. A signature is good for MaxSkew either side
// of its time and for one content only, so one seen on the wire opens
// nothing else.
//
// The package is the protocol only: Handler serves, Client fetches.
// Which peer to ask, and what to do with the bytes, is package
// images'.
package imagepeer
