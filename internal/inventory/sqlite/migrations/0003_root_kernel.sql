-- Where a profile's kernel comes from: '' for its kernel and initrds,
-- 'image' for the kernel its root image holds (config root.kernel).
ALTER TABLE profiles ADD COLUMN root_kernel TEXT NOT NULL DEFAULT '';
