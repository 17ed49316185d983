-- Which servers of the fleet hold which image content in their data
-- directory, so a server missing an image knows whom to fetch it from.
-- Each server writes only its own rows. Times are integer
-- microseconds since 1970 (UTC).
CREATE TABLE image_copies (
	server TEXT NOT NULL,
	sha256 TEXT NOT NULL,
	since  INTEGER NOT NULL,
	PRIMARY KEY (server, sha256)
);
CREATE INDEX image_copies_sha256 ON image_copies (sha256);
