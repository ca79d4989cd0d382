import type pg from "pg";
import type { ServiceConfig } from "../config/config.ts";
import { conflict } from "../shared/errors.ts";

// A failed job costs the service (a pg_dump of a database that then fails, a restore that fills a scratch database
// and drops it) but costs its workspace no quota: a tenant whose jobs fail, by accident or on purpose, could ask
// again without end. Every failed attempt of the last 24 hours counts against the workspace's budget
// (`failedJobAttemptsPerWorkspace`); past it the requests that start costly jobs are refused and its daily backups wait.

/**
 * The attempts of the last 24 hours of jobs on `workspace`'s databases (deleted ones too) that failed: retried, given
 * up, timed out, or never finished because their worker died (a later attempt of the same job exists). An attempt
 * retried because PostgreSQL was out of reach (outcome "unavailable") is the platform's failure and does not count,
 * unless the job was given up on it.
 */
export const failedAttemptsSql = (workspace: string) => `
  SELECT count(*)::int FROM databases d
    JOIN jobs j ON j.target_id = d.id AND j.created_at > now() - interval '24 hours'
    JOIN job_runs r ON r.job_id = j.id AND r.started_at > now() - interval '24 hours'
   WHERE d.workspace_id = ${workspace}
     AND (r.outcome IN ('failed', 'retry', 'timed-out')
          OR (r.finished_at IS NULL AND EXISTS (SELECT 1 FROM job_runs n WHERE n.job_id = r.job_id AND n.id > r.id)))`;

/** 409 when the workspace's failed attempts of the last 24 hours reached its budget; `what` names the request. */
export async function checkFailureBudget(
  client: Pick<pg.PoolClient, "query">,
  config: Pick<ServiceConfig, "failedJobAttemptsPerWorkspace">,
  workspaceId: string,
  what: string,
): Promise<void> {
  const { rows } = await client.query<{ n: number }>(`SELECT (${failedAttemptsSql("$1")}) AS n`, [workspaceId]);
  const failed = rows[0]!.n;
  const limit = config.failedJobAttemptsPerWorkspace;
  if (failed >= limit)
    throw conflict(
      `cannot ${what}: this workspace's jobs failed ${failed} times in the last 24 hours, its limit is ${limit}`,
      "see the failed backups' and databases' reasons and fix what fails; failures older than 24 hours no longer count, or ask the service's operator to raise failedJobAttemptsPerWorkspace",
    );
}
