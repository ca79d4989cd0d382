// The service as src/operator sees it. The operator builds and rate-limits one client per credential
// (credentials.ts) without knowing its methods: each kind's calls are declared beside the kinds
// (src/resources/remote/remote-api.ts, `MdsApi`). Only the components every kind shares call the service from here: the
// Secret component mints, reads and revokes a database's connections (`ConnectionApi`, which MdsApi extends).

export interface CallOptions {
  signal?: AbortSignal;
  idempotencyKey?: string;
}

/** An endpoint of a created connection; its connection string carries the password (the public API may leave it out). */
interface EndpointWithSecret {
  host: string;
  port: number;
  connectionString?: string | undefined;
}

/** A connection as a creation answer gives it, credentials included: the only place they ever appear. */
export interface CreatedConnection {
  id: string;
  name: string;
  endpoints: {
    direct?: EndpointWithSecret | undefined;
    pooled?: EndpointWithSecret | undefined;
    accelerate?: EndpointWithSecret | undefined;
  };
}

/** What the Secret component reads of one connection: how many clients use its login now (absent: cannot tell). */
interface ConnectionSessions {
  id: string;
  openSessions?: number | undefined;
}

/** What the Secret component reads of a database: its connections (which of them are a resource's own) and its default one. */
interface DatabaseConnections {
  createdAt: string;
  defaultConnectionId?: string | null | undefined;
  connections: { id: string; name: string; createdAt: string }[];
}

/** The calls of the Secret component (secret/recovery.ts, secret/revocation.ts): a database's connections, minted and revoked. */
export interface ConnectionApi {
  createConnection(databaseId: string, body: { name: string }, options?: CallOptions): Promise<CreatedConnection>;
  deleteConnection(id: string, options?: CallOptions): Promise<void>;
  /** Read for its connections (which of them are the resource's own). */
  getDatabase(id: string, options?: CallOptions): Promise<DatabaseConnections>;
  /**
   * Read for `openSessions`, the client sessions of its login (our service's extension; absent at the public API,
   * which cannot tell): a rotation revokes the old login only once none is left (secret/rotation.ts).
   */
  getConnection(id: string, options?: CallOptions): Promise<ConnectionSessions>;
  /** Whether the server has announced that it replays Idempotency-Keys: only then may a POST be sent again. */
  replaysIdempotencyKeys(): boolean;
}

/** What the Secret component needs of a credential's mirror: to forget a database whose connections it changed. */
export interface ConnectionMirror {
  forgetDatabase(id: string): void;
}

export function errorCode(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}
export const isApiNotFound = (err: unknown) => errorCode(err) === "not_found";
export const isApiConflict = (err: unknown) => errorCode(err) === "conflict";

/** A failure after which a POST may still have acted: anything but a refusal the service answered (a 4xx). */
export function mayHaveLanded(err: unknown): boolean {
  const status = (err as { status?: unknown } | undefined)?.status;
  return typeof status !== "number" || status >= 500;
}
