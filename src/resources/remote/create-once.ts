import { errorCode, isApiConflict, mayHaveLanded } from "../../operator/api.ts";
import { ReconcileError } from "../../operator/errors.ts";
import type { Lookup, RemoteMirror } from "./mirror.ts";

// Creating without duplicates (docs/design.md#creating-without-duplicates), written once for every kind with a logicalId.

/** The object with this logicalId; `undefined` only when the service said so (a failed lookup throws). */
export async function findByLogicalId<R>(
  list: () => Promise<{ data: R[]; skipped?: number | undefined }>,
  what: string,
  logicalId: string,
): Promise<R | undefined> {
  const page = await list();
  const found = page.data[0];
  if (found === undefined && (page.skipped ?? 0) > 0) {
    throw new ReconcileError(
      "RemoteUnreadable",
      `cannot tell whether ${what} "${logicalId}" exists: the service answered with a ${what} the operator cannot read`,
    );
  }
  return found;
}

/**
 * Lookup before create, then one POST carrying the logicalId and a derived Idempotency-Key.
 * - The mirror's full list (made in this process, so it holds whatever a crashed predecessor created) proves absence
 *   without a call of its own; a hit, a mirror that cannot tell, or a POST of ours whose answer was lost asks the
 *   service per object. Safety does not rest on this: the POST carries the logicalId.
 * - A concurrent or earlier create with our logicalId (409), or our own earlier POST whose answer was lost, sent
 *   again after the spec changed (422: the Idempotency-Key was used for another body): adopt what the lookup finds.
 * - A POST that may have acted without an answer makes the mirror stop vouching for the logicalId until a lookup.
 */
export async function createOnce<R, C>(args: {
  mirror: RemoteMirror;
  logicalId: string;
  /** The mirror's index for this logicalId. */
  known: () => Lookup<R>;
  lookup: () => Promise<R | undefined>;
  post: () => Promise<C>;
}): Promise<{ adopted: R } | { created: C }> {
  const { mirror, logicalId } = args;
  // One list serves a burst of creates; a failure here only means asking per object.
  await mirror.ready().catch(() => undefined);
  const known = args.known();
  if (!(known.known && known.value === undefined)) {
    const found = await args.lookup();
    mirror.settle(logicalId);
    if (found !== undefined) return { adopted: found };
  }
  try {
    return { created: await args.post() };
  } catch (err) {
    if (isApiConflict(err) || errorCode(err) === "unprocessable") {
      const again = await args.lookup();
      if (again !== undefined) return { adopted: again };
    }
    if (mayHaveLanded(err)) mirror.suspect(logicalId);
    throw err;
  }
}
