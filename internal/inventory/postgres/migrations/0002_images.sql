-- Root disk images (issue 5): name -> content in DATA/images/sha256/<hex>.
CREATE TABLE images (
	name     TEXT PRIMARY KEY,
	sha256   TEXT NOT NULL,
	size     BIGINT NOT NULL,
	imported TIMESTAMPTZ NOT NULL
);
CREATE INDEX profiles_root_image ON profiles (root_image);
