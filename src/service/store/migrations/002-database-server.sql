-- A region has one or more PostgreSQL servers (regions file, `servers`): each database records the one it lives on,
-- by the server's name in the regions file, so every later operation reaches that server and no other.
-- NULL: a database from before this column; the service sets it to its region's first server at start (servers.ts).
ALTER TABLE databases ADD COLUMN server text;
-- Placement counts the live databases of each server of a region.
CREATE INDEX databases_region_server ON databases (region, server) WHERE deleted_at IS NULL;
