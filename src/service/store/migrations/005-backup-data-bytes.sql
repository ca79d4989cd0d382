-- Each table's data size in a backup's archive, by the archive's dump id (no names), read once at dump time: a
-- restore balances its parallel runs by it without reading the whole archive first (src/service/jobs/restore-plan.ts).
-- NULL for backups taken before, and for archives whose version the service does not read: those are read again.
ALTER TABLE backups ADD COLUMN data_bytes jsonb;
