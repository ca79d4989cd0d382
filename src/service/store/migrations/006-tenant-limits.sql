-- The per-workspace budget of failed job attempts (src/service/domain/job-budget.ts) counts a workspace's databases,
-- deleted ones too (deleting a database must not reset it), and their jobs of the last day.
CREATE INDEX databases_workspace ON databases (workspace_id);
CREATE INDEX jobs_target_created ON jobs (target_id, created_at);
-- The branch quota per workspace (src/service/domain/branches.ts).
CREATE INDEX branches_workspace ON branches (workspace_id) WHERE deleted_at IS NULL;
-- The purge of soft-deleted rows past their retention (src/service/jobs/scheduler.ts) finds them without a scan.
CREATE INDEX projects_deleted ON projects (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX databases_deleted ON databases (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX branches_deleted ON branches (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX backups_deleted ON backups (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX tokens_access_expiry ON tokens (expires_at) WHERE kind = 'access';
