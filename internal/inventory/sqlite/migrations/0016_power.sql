-- How bootfleet powers each machine (issue 34). password and secureon are
-- secrets the drivers need in the clear; the API never returns them.
-- broadcast is dotted IPv4 text or ''.
CREATE TABLE machine_power (
	mac          TEXT PRIMARY KEY REFERENCES machines (mac) ON DELETE CASCADE,
	driver       TEXT NOT NULL CHECK (driver IN ('wol', 'ipmi', 'redfish', 'none')),
	host         TEXT NOT NULL DEFAULT '',
	username     TEXT NOT NULL DEFAULT '',
	password     TEXT NOT NULL DEFAULT '',
	cipher_suite INTEGER NOT NULL DEFAULT 0,
	insecure     INTEGER NOT NULL DEFAULT 0,
	broadcast    TEXT NOT NULL DEFAULT '',
	secureon     TEXT NOT NULL DEFAULT '',
	source       TEXT NOT NULL DEFAULT 'api'
);

-- A machine's one-shot boot override (bootfleet machine next-boot): its
-- next network boot takes it and deletes it. target is a profile name or
-- 'local'; set_at is integer microseconds since 1970.
CREATE TABLE machine_next_boot (
	mac    TEXT PRIMARY KEY REFERENCES machines (mac) ON DELETE CASCADE,
	target TEXT NOT NULL,
	set_at INTEGER NOT NULL
);

-- One row per firing of a schedule (config schedules:), claimed by the
-- server that runs it, so a fleet runs each firing once. at is integer
-- microseconds since 1970; rows older than 30 days are pruned.
CREATE TABLE schedule_runs (
	name   TEXT NOT NULL,
	at     INTEGER NOT NULL,
	server TEXT NOT NULL,
	PRIMARY KEY (name, at)
);

-- Power schedules added through the API (those of the config file stay
-- in the file). machines is a JSON array of names or MACs.
CREATE TABLE power_schedules (
	name     TEXT PRIMARY KEY,
	at       TEXT NOT NULL,
	action   TEXT NOT NULL,
	profile  TEXT NOT NULL DEFAULT '',
	machines TEXT NOT NULL DEFAULT '[]',
	all_machines INTEGER NOT NULL DEFAULT 0,
	wave     TEXT NOT NULL DEFAULT ''
);
