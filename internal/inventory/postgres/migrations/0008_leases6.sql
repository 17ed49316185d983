-- DHCPv6 leases (issue 22), apart from the IPv4 ones so a machine can hold
-- one of each. Keyed by the client's DUID in lower-case hex; mac is '' when
-- the server could not tell it; ip is the canonical text form (RFC 5952).
CREATE TABLE leases6 (
	duid   TEXT PRIMARY KEY,
	mac    TEXT NOT NULL DEFAULT '',
	ip     TEXT NOT NULL UNIQUE,
	expiry TIMESTAMPTZ NOT NULL
);
