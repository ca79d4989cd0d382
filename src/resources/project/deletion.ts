import { errorCode, isApiConflict, isApiNotFound } from "../../operator/api.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { messageOf } from "../../operator/errors.ts";
import type { Deletion } from "../../operator/managed-handler.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../remote/mirror.ts";

/**
 * A project goes after its other databases (each Database resource deletes its own). Its default database: our
 * service deletes it alone once the others are gone, then the project; the public API refuses that (403) and
 * deletes it with the project. "Still has databases" (our 409, the public API's 400) is a wait, not an error.
 * A database a protected Database resource manages blocks it all: the project's default database would go with it.
 */
export async function deleteProject(
  api: MdsApi,
  mirror: RemoteMirror,
  id: string,
  protectedBy: (databaseId: string) => Promise<string | undefined>,
): Promise<Deletion> {
  const listed: { data: RemoteDatabase[]; skipped?: number | undefined } = await api
    .listDatabases({ projectId: id, limit: 100 })
    .catch((err: unknown) => {
      if (isApiNotFound(err)) return { data: [] as RemoteDatabase[] };
      throw err;
    });
  for (const d of listed.data) {
    const guard = await protectedBy(d.id);
    if (guard === undefined) continue;
    return {
      done: false,
      reason: "DeletionBlocked",
      message: `Project "${id}" is not deleted: Database "${guard}" has deletionProtection and manages its ${d.isDefault ? "default " : ""}database "${d.id}", which would go with it. Set that Database's spec.deletionProtection to false, or this Project's deletionPolicy to Retain`,
    };
  }
  const others = listed.data.filter((d) => !d.isDefault);
  if (others.length > 0 || (listed.skipped ?? 0) > 0) {
    const count = others.length + (listed.skipped ?? 0);
    return {
      done: false,
      reason: "WaitingForDatabases",
      message: `Project "${id}" still has ${count} database(s) (${
        others
          .slice(0, 3)
          .map((d) => d.id)
          .join(", ") || "unreadable"
      }); it is deleted after them`,
    };
  }
  for (const d of listed.data) {
    try {
      await api.deleteDatabase(d.id);
    } catch (err) {
      // 403: the public API deletes the default database only with its project, just below.
      if (!isApiNotFound(err) && errorCode(err) !== "forbidden") throw err;
    }
    mirror.forgetDatabase(d.id);
  }
  try {
    await api.deleteProject(id);
  } catch (err) {
    if (isApiNotFound(err)) return { done: true };
    if (isApiConflict(err) || errorCode(err) === "invalid_request") {
      return {
        done: false,
        reason: "WaitingForDatabases",
        message: `Project "${id}" still has databases (the service said: ${messageOf(err)}); waiting`,
      };
    }
    throw err;
  }
  return { done: true };
}
