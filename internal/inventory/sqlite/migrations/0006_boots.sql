-- Boot records (telemetry timelines) that ended, so the history outlives
-- a restart. record is the timeline's JSON; the other columns are what
-- the API filters and retention orders by. started is microseconds since
-- 1970, like every SQLite time column here.
CREATE TABLE boots (
	id      TEXT PRIMARY KEY,
	mac     TEXT NOT NULL,
	started INTEGER NOT NULL,
	state   TEXT NOT NULL,
	record  TEXT NOT NULL
);
CREATE INDEX boots_started ON boots (started, id);
CREATE INDEX boots_mac ON boots (mac, started);
