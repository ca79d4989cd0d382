import { randomBytes, X509Certificate } from "node:crypto";
import { chmod, chown, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import path from "node:path";
import { generate } from "selfsigned";
import type { OsUser } from "./os-user.ts";

/** A private CA and a server certificate it signed, as files under one directory. */
export type ServerTls = {
  /** PEM of the CA: what a client needs to verify the server (`sslrootcert`, `PGSSLROOTCERT`, pg's `ssl.ca`). */
  caCert: string;
  caFile: string;
  certFile: string;
  /** Mode 0600, owned by the server's OS user. */
  keyFile: string;
};

const day = 86_400_000;

async function writePrivate(file: string, text: string, mode: number, owner: OsUser | undefined): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, text, { mode });
  await chmod(tmp, mode);
  if (owner) await chown(tmp, owner.uid, owner.gid);
  await rename(tmp, file);
}

async function readIfPresent(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * Keeps a CA under `dir` (made once, kept across restarts so clients that trust it keep working: 10 years, key
 * 0600 readable only by us) and issues a server certificate for `hosts` (plus localhost, 127.0.0.1 and ::1) at
 * every call, so a changed host is always covered. EC P-256 through the `selfsigned` package (no openssl needed).
 * `owner`: the OS user of the servers that read the certificate and its key (PostgreSQL and PgBouncer run as
 * `postgres` when we are root).
 */
export async function ensureServerTls(
  dir: string,
  options: { hosts?: string[]; owner?: OsUser | undefined } = {},
): Promise<ServerTls> {
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const caFile = path.join(dir, "ca.crt");
  const caKeyFile = path.join(dir, "ca.key");
  let caCert = await readIfPresent(caFile);
  let caKey = await readIfPresent(caKeyFile);
  if (!caCert || !caKey || new X509Certificate(caCert).validToDate.getTime() < Date.now() + 30 * day) {
    // A name of its own: a client trusting two of these CAs (tests run several stacks in one process) finds the
    // issuer by name, and two CAs of one name make it check a signature against the wrong key.
    const ca = await generate([{ name: "commonName", value: `mds local CA ${randomBytes(6).toString("hex")}` }], {
      keyType: "ec",
      algorithm: "sha256",
      notAfterDate: new Date(Date.now() + 3650 * day),
      extensions: [
        { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
        { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
      ],
    });
    // Key first: a crash between the two writes leaves a key without a certificate, which is made anew next time.
    await writePrivate(caKeyFile, ca.private, 0o600, undefined);
    await writePrivate(caFile, ca.cert, 0o644, undefined);
    caCert = ca.cert;
    caKey = ca.private;
  }
  const names = [...new Set(["localhost", "127.0.0.1", "::1", ...(options.hosts ?? [])])].filter(
    (n) => n && n !== "0.0.0.0" && n !== "::",
  );
  const server = await generate([{ name: "commonName", value: names.find((n) => n !== "localhost") ?? "localhost" }], {
    keyType: "ec",
    algorithm: "sha256",
    notAfterDate: new Date(Date.now() + 825 * day),
    ca: { key: caKey, cert: caCert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: names.map((n) => (isIP(n) ? { type: 7 as const, ip: n } : { type: 2 as const, value: n })),
      },
    ],
  });
  const certFile = path.join(dir, "server.crt");
  const keyFile = path.join(dir, "server.key");
  // PostgreSQL refuses a key file readable by others; it and PgBouncer run as `owner`.
  await writePrivate(keyFile, server.private, 0o600, options.owner);
  await writePrivate(certFile, server.cert, 0o644, options.owner);
  return { caCert, caFile, certFile, keyFile };
}
