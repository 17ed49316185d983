-- What UEFI x64 firmware loads for a profile: '' or 'ipxe' for iPXE,
-- 'grub' for the signed shim and grub of secure_boot (config loader).
ALTER TABLE profiles ADD COLUMN loader TEXT NOT NULL DEFAULT '';
