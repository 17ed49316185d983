-- Times are timestamptz; addresses are dotted
-- IPv4 text; MACs are lower-case colon form; labels and initrds are JSON.
CREATE TABLE profiles (
	name       TEXT PRIMARY KEY,
	kernel     TEXT NOT NULL,
	initrds    TEXT NOT NULL DEFAULT '[]',
	cmdline    TEXT NOT NULL DEFAULT '',
	root_image TEXT NOT NULL DEFAULT '',
	overlay    TEXT NOT NULL DEFAULT '',
	source     TEXT NOT NULL DEFAULT 'api'
);

CREATE TABLE machines (
	mac          TEXT PRIMARY KEY,
	name         TEXT NOT NULL DEFAULT '',
	profile      TEXT REFERENCES profiles (name),
	labels       TEXT NOT NULL DEFAULT '{}',
	ip           TEXT UNIQUE,
	state        TEXT NOT NULL CHECK (state IN ('discovered', 'ready', 'booting', 'booted', 'failed')),
	source       TEXT NOT NULL DEFAULT 'api',
	last_boot    TIMESTAMPTZ,
	last_address TEXT
);
CREATE UNIQUE INDEX machines_name_key ON machines (name) WHERE name <> '';
CREATE INDEX machines_profile ON machines (profile);

CREATE TABLE leases (
	mac    TEXT PRIMARY KEY,
	ip     TEXT NOT NULL UNIQUE,
	expiry TIMESTAMPTZ NOT NULL
);

CREATE TABLE events (
	id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at      TIMESTAMPTZ NOT NULL,
	mac     TEXT NOT NULL,
	kind    TEXT NOT NULL,
	details TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_mac ON events (mac, id);
