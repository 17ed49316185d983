-- The fleet's servers (issue 21): each bootfleet sharing the store
-- registers here and updates its own row with a heartbeat and its load.
-- addrs is a JSON array.
CREATE TABLE servers (
	name           TEXT PRIMARY KEY,
	addrs          TEXT NOT NULL DEFAULT '[]',
	version        TEXT NOT NULL DEFAULT '',
	started        TIMESTAMPTZ NOT NULL,
	heartbeat      TIMESTAMPTZ NOT NULL,
	stopped        TIMESTAMPTZ,
	tftp_transfers INTEGER NOT NULL DEFAULT 0,
	nbd_sessions   INTEGER NOT NULL DEFAULT 0,
	bytes_per_sec  BIGINT NOT NULL DEFAULT 0
);
