import { errorCode, isApiConflict, isApiNotFound } from "../../operator/api.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import type { Deletion } from "../../operator/managed-handler.ts";
import type { RemoteMirror } from "../remote/mirror.ts";

/**
 * Deletes one database. A project's default database cannot go first: our service answers 409 until the project's
 * other databases are gone; the public API answers 403 and deletes it only with its project. Both are waits.
 */
export async function deleteDatabase(api: MdsApi, mirror: RemoteMirror, id: string): Promise<Deletion> {
  try {
    await api.deleteDatabase(id);
  } catch (err) {
    if (isApiNotFound(err)) return { done: true };
    if (isApiConflict(err)) {
      // Our service: the default database goes once the project's other databases are gone.
      return {
        done: false,
        reason: "WaitingForDatabases",
        message: `Database "${id}" is its project's default database; it can be deleted once the project's other databases are gone`,
      };
    }
    // The public API: 403 for a project's default database, which it deletes only with its project. A 403 on
    // any other database is what it says (the token may not delete it).
    if (errorCode(err) === "forbidden" && (mirror.peekDatabase(id) ?? (await api.getDatabase(id))).isDefault) {
      return {
        done: false,
        reason: "WaitingForProject",
        message: `Database "${id}" is its project's default database; the service deletes it only with its project (delete the Project resource or the project)`,
      };
    }
    throw err;
  }
  mirror.forgetDatabase(id);
  return { done: true };
}
