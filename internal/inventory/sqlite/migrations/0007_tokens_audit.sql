-- API tokens with scopes and the API's audit trail (issue 23). A token is
-- kept as the SHA-256 of its secret, looked up by that hash on every
-- request. Times are integer microseconds since 1970 (UTC).
CREATE TABLE api_tokens (
	name    TEXT PRIMARY KEY,
	scope   TEXT NOT NULL CHECK (scope IN ('read', 'operate', 'admin')),
	hash    TEXT NOT NULL UNIQUE,
	created INTEGER NOT NULL
);

CREATE TABLE audit (
	id      INTEGER PRIMARY KEY AUTOINCREMENT,
	at      INTEGER NOT NULL,
	token   TEXT NOT NULL,
	remote  TEXT NOT NULL DEFAULT '',
	route   TEXT NOT NULL,
	target  TEXT NOT NULL DEFAULT '',
	summary TEXT NOT NULL DEFAULT '',
	status  INTEGER NOT NULL
);
CREATE INDEX audit_at ON audit (at);
