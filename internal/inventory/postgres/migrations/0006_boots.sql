-- Boot records (telemetry timelines) that ended, so the history outlives
-- a restart. record is the timeline's JSON; the other columns are what
-- the API filters and retention orders by.
CREATE TABLE boots (
	id      TEXT PRIMARY KEY,
	mac     TEXT NOT NULL,
	started TIMESTAMPTZ NOT NULL,
	state   TEXT NOT NULL,
	record  TEXT NOT NULL
);
CREATE INDEX boots_started ON boots (started, id);
CREATE INDEX boots_mac ON boots (mac, started);
