-- What a backup that has not completed yet counts against its workspace's byte quota (backupBytesPerWorkspace): its
-- database's size when it was requested, then when its job started. Its archive's `size` replaces it on completion.
ALTER TABLE backups ADD COLUMN reserved_bytes bigint;
