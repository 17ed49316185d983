-- The kernel and initrds a profile boots on arm64 machines, as JSON
-- {"kernel": "...", "initrd": ["..."]}; '{}' when it boots none (config
-- arm64:). kernel and initrds stay the x86_64 machines'.
ALTER TABLE profiles ADD COLUMN arm64 TEXT NOT NULL DEFAULT '{}';
