-- Which version of its profile's root image a machine boots, over its
-- profile's channel (issue 33): '' follows the profile; 'production',
-- 'test' or a version number wins over it.
ALTER TABLE machines ADD COLUMN root_channel TEXT NOT NULL DEFAULT '';
