// Rows of the control database, as the queries in queries.ts select them.
export type ProjectRow = {
  id: string;
  workspace_id: string;
  workspace_name: string;
  name: string;
  default_region: string;
  logical_id: string | null;
  created_at: Date;
};
export type DatabaseRow = {
  id: string;
  project_id: string;
  project_name: string;
  workspace_id: string;
  name: string;
  region: string;
  /** Name of the region's server it lives on (regions file); null only for rows from before servers were recorded. */
  server: string | null;
  status: "provisioning" | "ready" | "recovering" | "failure";
  is_default: boolean;
  pg_name: string;
  owner_role: string;
  source:
    | { type: "empty" }
    | { type: "backup"; databaseId: string; backupId: string }
    | { type: "database"; databaseId: string };
  logical_id: string | null;
  /** The branch it is on; null: none (its project had no branch when it was made). */
  branch_id: string | null;
  default_connection_id: string;
  created_at: Date;
};
export type ConnectionRow = { id: string; database_id: string; name: string; role_name: string; created_at: Date };
export type BackupRow = {
  id: string;
  database_id: string;
  status: "running" | "completed" | "failed";
  size: string | null;
  sha256: string | null;
  path: string | null;
  /** Each data entry's bytes by the archive's dump id (dump.ts DumpResult), for a restore's plan; only getBackup reads it. */
  data_bytes?: Record<string, number> | null;
  created_at: Date;
};
export type BranchRow = {
  id: string;
  project_id: string;
  project_name: string;
  workspace_id: string;
  git_name: string;
  is_default: boolean;
  role: "production" | "preview";
  created_at: Date;
  updated_at: Date;
};
