-- Keys every server of a fleet shares, such as the one that signs the
-- names of read-only base exports. value is hex; created is integer
-- microseconds since 1970 (UTC), like every SQLite time column here.
CREATE TABLE fleet_secrets (
	name    TEXT PRIMARY KEY,
	value   TEXT NOT NULL,
	created INTEGER NOT NULL
);
