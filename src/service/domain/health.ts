import type { ServiceDeps } from "../runtime/deps.ts";
import { ServiceError } from "../shared/errors.ts";

/** Ready means the control database answers: without it no /v1 request can be served. */
export async function checkReady(deps: Pick<ServiceDeps, "pool">): Promise<void> {
  try {
    await deps.pool.query("SELECT 1");
  } catch (err) {
    throw new ServiceError("unavailable", "the control database is unreachable", "retry later", {
      cause: err,
      headers: { "retry-after": "5" },
    });
  }
}
