import type { PublicDatabase } from "../../contract/index.ts";
import type { MdsApi } from "./remote-api.ts";

// What the one-shot kinds' operations (a backup, a restore, a schedule's retention) share about the service: whether
// it takes an operation on request at all, and a refusal as a typed error. Each kind's operation.ts calls the service
// through these; its controller only orders the steps.

/**
 * The service answered with a refusal (a 4xx): nothing was done, and asking the same way again would not help.
 * `why` says which refusal, in the operation's terms.
 */
export class Refused<W extends string = string> extends Error {
  readonly why: W;
  constructor(why: W, message: string) {
    super(message);
    this.name = "Refused";
    this.why = why;
  }
}

/**
 * The database an operation acts on, and whether this server takes operations on request: only one that announced
 * Idempotency-Key replay does (our service); the public API's provider takes backups itself and has no such endpoint.
 * Learned from any answer, so the read that checks the database tells it.
 */
export async function readOperationTarget(
  api: MdsApi,
  databaseId: string,
): Promise<{ database: PublicDatabase; onRequest: boolean }> {
  const database = await api.getDatabase(databaseId);
  return { database, onRequest: api.replaysIdempotencyKeys() };
}

/**
 * Why nothing was asked of a server that takes no backups on request: `verbs` it lacks ("take", "take or delete"),
 * `methods` of the route it lacks, what the resource did (`outcome`) and where the backups show instead (`listed`).
 */
export function notSupportedMessage(
  databaseId: string,
  what: { verbs: string; methods: string; outcome: string; listed: string },
): string {
  return `the service does not ${what.verbs} backups on request (no ${what.methods} /v1/databases/${databaseId}/backups, as in the public API, whose provider takes backups itself); ${what.outcome}. Its backups are listed in the Database's status.latestBackup ${what.listed}`;
}
