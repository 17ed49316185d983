-- Image versions (issue 33): every image name has numbered versions,
-- each its content, the version it was made from, and its state. The
-- image's row says which version is its current production one and
-- mirrors that version's content, so a boot reads one row.
CREATE TABLE image_versions (
	image    TEXT NOT NULL,
	version  INTEGER NOT NULL,
	sha256   TEXT NOT NULL,
	parent   INTEGER NOT NULL DEFAULT 0,
	state    TEXT NOT NULL,
	made_by  TEXT NOT NULL DEFAULT '',
	made     TIMESTAMPTZ NOT NULL,
	size     BIGINT NOT NULL,
	stored   BIGINT NOT NULL DEFAULT 0,
	promoted TIMESTAMPTZ,
	machine  TEXT NOT NULL DEFAULT '',
	server   TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (image, version)
);
CREATE INDEX image_versions_sha256 ON image_versions (sha256);
ALTER TABLE images ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
-- Images imported before versions become their version 1, in production.
INSERT INTO image_versions (image, version, sha256, state, made, size, promoted)
	SELECT name, 1, sha256, 'production', imported, size, imported FROM images;
-- Which version of its root image a profile's machines boot: '' for
-- production, 'test', or a version number pinning one.
ALTER TABLE profiles ADD COLUMN root_channel TEXT NOT NULL DEFAULT '';
