-- Every machine is itself (issue 32). machine_id is its systemd
-- machine-id, 32 lower-case hex digits, made when the machine is added;
-- machines added before this migration get one here.
ALTER TABLE machines ADD COLUMN machine_id TEXT NOT NULL DEFAULT '';
UPDATE machines SET machine_id = lower(hex(randomblob(16)));
CREATE UNIQUE INDEX machines_machine_id_key ON machines (machine_id) WHERE machine_id <> '';

-- SSH host keys: public keys in clear (authorized_keys lines, JSON array),
-- private keys sealed with the fleet's identity key, which is never in the
-- database (sealed is base64). key_id names that key. created is integer
-- microseconds since 1970 (UTC).
CREATE TABLE host_keys (
	mac     TEXT PRIMARY KEY,
	public  TEXT NOT NULL,
	sealed  TEXT NOT NULL,
	key_id  TEXT NOT NULL,
	created INTEGER NOT NULL
);
