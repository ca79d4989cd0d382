-- Control data of the Managed Database Service. Ids are the public ids (proj_…, db_…).

CREATE TABLE workspaces (
  id          text PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Service tokens (kind 'service'), OAuth access and refresh tokens. Only SHA-256 hashes are stored.
-- OAuth tokens hang off the service token that authenticated the client (parent_id) and share a chain
-- (chain_id) so that reuse of a spent refresh token revokes the whole chain.
CREATE TABLE tokens (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL REFERENCES workspaces(id),
  kind          text NOT NULL CHECK (kind IN ('service', 'access', 'refresh')),
  name          text NOT NULL DEFAULT '',
  hash          bytea NOT NULL UNIQUE,
  scopes        text[] NOT NULL,
  parent_id     text REFERENCES tokens(id),
  chain_id      text,
  expires_at    timestamptz,
  used_at       timestamptz,
  revoked_at    timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tokens_chain ON tokens (chain_id) WHERE chain_id IS NOT NULL;

CREATE TABLE projects (
  id              text PRIMARY KEY,
  workspace_id    text NOT NULL REFERENCES workspaces(id),
  name            text NOT NULL,
  default_region  text NOT NULL,
  logical_id      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz
);
CREATE UNIQUE INDEX projects_logical_id ON projects (workspace_id, logical_id) WHERE deleted_at IS NULL AND logical_id IS NOT NULL;
CREATE INDEX projects_page ON projects (workspace_id, created_at, id) WHERE deleted_at IS NULL;

CREATE TABLE databases (
  id                     text PRIMARY KEY,
  project_id             text NOT NULL REFERENCES projects(id),
  workspace_id           text NOT NULL REFERENCES workspaces(id),
  name                   text NOT NULL,
  region                 text NOT NULL,
  status                 text NOT NULL CHECK (status IN ('provisioning', 'ready', 'recovering', 'failure')),
  is_default             boolean NOT NULL DEFAULT false,
  pg_name                text NOT NULL UNIQUE,
  owner_role             text NOT NULL UNIQUE,
  source                 jsonb NOT NULL DEFAULT '{"type":"empty"}',
  logical_id             text,
  default_connection_id  text NOT NULL,
  failure_reason         text,
  created_at             timestamptz NOT NULL DEFAULT now(),
  deleted_at             timestamptz
);
CREATE UNIQUE INDEX databases_logical_id ON databases (project_id, logical_id) WHERE deleted_at IS NULL AND logical_id IS NOT NULL;
CREATE INDEX databases_page ON databases (workspace_id, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX databases_project_page ON databases (project_id, created_at, id) WHERE deleted_at IS NULL;

-- One login role per connection. `verifier` is the SCRAM verifier (never the password).
CREATE TABLE connections (
  id           text PRIMARY KEY,
  database_id  text NOT NULL REFERENCES databases(id),
  name         text NOT NULL,
  role_name    text NOT NULL UNIQUE,
  verifier     text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX connections_database ON connections (database_id, created_at, id);

CREATE TABLE backups (
  id            text PRIMARY KEY,
  database_id   text NOT NULL REFERENCES databases(id),
  status        text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
  trigger       text NOT NULL CHECK (trigger IN ('manual', 'daily')),
  size          bigint,
  sha256        text,
  path          text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  completed_at  timestamptz,
  deleted_at    timestamptz
);
CREATE INDEX backups_database ON backups (database_id, created_at DESC) WHERE deleted_at IS NULL;

-- Durable jobs. A worker holds the row lock (FOR UPDATE SKIP LOCKED) in an open transaction for the whole
-- run: if the worker dies, its session ends, the lock goes, and the job is claimable again.
CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  kind             text NOT NULL CHECK (kind IN ('provision', 'backup', 'restore', 'drop')),
  target_id        text NOT NULL,
  payload          jsonb NOT NULL DEFAULT '{}',
  state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
  idempotency_key  text,
  error            text,
  run_after        timestamptz NOT NULL DEFAULT now(),
  created_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
);
CREATE INDEX jobs_pending ON jobs (id) WHERE state = 'pending';
CREATE INDEX jobs_target ON jobs (target_id, id) WHERE state = 'pending';

-- Every attempt of every job, written outside the job's lock so that crashes are counted too.
-- `outcome` says what the attempt really did; for restores 'restored' marks the one run that swapped data in.
CREATE TABLE job_runs (
  id           bigserial PRIMARY KEY,
  job_id       bigint NOT NULL,
  instance     text NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  finished_at  timestamptz,
  outcome      text
);
CREATE INDEX job_runs_job ON job_runs (job_id);

-- Stored responses of POSTs with an Idempotency-Key. `response` is AES-256-GCM encrypted: it holds credentials.
CREATE TABLE idempotency (
  workspace_id  text NOT NULL,
  key           text NOT NULL,
  request_hash  text NOT NULL,
  status        integer NOT NULL,
  response      bytea NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  PRIMARY KEY (workspace_id, key)
);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);
