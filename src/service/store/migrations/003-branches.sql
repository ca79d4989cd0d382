-- Branches (the public API's preview environments): a project's branches, each named by a git branch name, and the
-- branch each database is on. Soft-deleted, as the public API's are (deleted_at), so ids are never reused.
CREATE TABLE branches (
  id            text PRIMARY KEY,
  project_id    text NOT NULL REFERENCES projects(id),
  workspace_id  text NOT NULL REFERENCES workspaces(id),
  git_name      text NOT NULL,
  is_default    boolean NOT NULL DEFAULT false,
  role          text NOT NULL CHECK (role IN ('production', 'preview')),
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  deleted_at    timestamptz
);
-- One live branch per git name, one default and one production branch per project.
CREATE UNIQUE INDEX branches_git_name ON branches (project_id, git_name) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX branches_default ON branches (project_id) WHERE deleted_at IS NULL AND is_default;
CREATE UNIQUE INDEX branches_production ON branches (project_id) WHERE deleted_at IS NULL AND role = 'production';
CREATE INDEX branches_page ON branches (project_id, created_at, id) WHERE deleted_at IS NULL;

-- NULL: on no branch (a database of a project that had no branch when it was made: "unassigned" in the public API).
ALTER TABLE databases ADD COLUMN branch_id text REFERENCES branches(id);
CREATE INDEX databases_branch ON databases (branch_id, created_at, id) WHERE deleted_at IS NULL AND branch_id IS NOT NULL;

-- A database's logicalId is unique within its branch (the public API's rule); databases on no branch share their
-- project's scope, as before. Same index name: logical-id.ts recognises the race by it.
DROP INDEX databases_logical_id;
CREATE UNIQUE INDEX databases_logical_id ON databases (project_id, coalesce(branch_id, ''), logical_id) WHERE deleted_at IS NULL AND logical_id IS NOT NULL;
