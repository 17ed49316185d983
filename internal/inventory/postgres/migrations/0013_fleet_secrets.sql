-- Keys every server of a fleet shares, such as the one that signs the
-- names of read-only base exports. value is hex.
CREATE TABLE fleet_secrets (
	name    TEXT PRIMARY KEY,
	value   TEXT NOT NULL,
	created TIMESTAMPTZ NOT NULL
);
