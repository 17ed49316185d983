-- files: and vars: of profiles and machines set through the API (issue
-- 32), as JSON: files an array of {"path", "mode", "owner", "template"},
-- vars an object of strings. Config records keep theirs in the config.
ALTER TABLE profiles ADD COLUMN root_files TEXT NOT NULL DEFAULT '[]';
ALTER TABLE profiles ADD COLUMN vars TEXT NOT NULL DEFAULT '{}';
ALTER TABLE machines ADD COLUMN root_files TEXT NOT NULL DEFAULT '[]';
ALTER TABLE machines ADD COLUMN vars TEXT NOT NULL DEFAULT '{}';
