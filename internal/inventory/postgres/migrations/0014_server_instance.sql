-- Which running bootfleet a server row belongs to: a random id kept in
-- its data directory, so a server that restarts takes its own live row
-- back, while another one under the same name is refused.
ALTER TABLE servers ADD COLUMN instance TEXT NOT NULL DEFAULT '';
