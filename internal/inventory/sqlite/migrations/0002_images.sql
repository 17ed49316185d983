-- Root disk images (issue 5): name -> content in DATA/images/sha256/<hex>.
-- imported is integer microseconds since 1970 (UTC).
CREATE TABLE images (
	name     TEXT PRIMARY KEY,
	sha256   TEXT NOT NULL,
	size     INTEGER NOT NULL,
	imported INTEGER NOT NULL
);
CREATE INDEX profiles_root_image ON profiles (root_image);
