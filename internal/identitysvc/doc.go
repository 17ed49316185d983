// Package identitysvc makes and serves what makes each diskless machine
// itself (package identity is the wire form): its name and machine-id
// from the inventory, its SSH host keys, made on first need and kept in
// the inventory sealed with the fleet's identity key (a file on every
// server, never in the database, whose check value the inventory keeps:
// OpenKey), and the files its profile and its own entry render for it,
// from the config or, for records the API made, from the inventory.
//
// Machines fetch their identity from the HTTP boot server (Handler) with
// the export name of their NBD root as the credential: the agent already
// holds it, and rootdisk checks it the way the NBD server does, so a
// machine gets its own identity and no other. Admins see public keys
// (KnownHosts) and fingerprints, never a private key.
package identitysvc
