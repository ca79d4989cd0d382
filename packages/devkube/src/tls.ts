import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

interface TlsMaterial {
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/**
 * A CA kept under DIR/pki (so kubeconfigs stay valid across restarts) and a server certificate
 * re-issued at every start (so a changed --host is always covered). EC P-256 via openssl: both
 * kubectl and client-node accept it.
 */
export async function ensureTls(dir: string, host: string): Promise<TlsMaterial> {
  const pki = path.join(dir, "pki");
  await mkdir(pki, { recursive: true, mode: 0o700 });
  const caKey = path.join(pki, "ca.key");
  const caCrt = path.join(pki, "ca.crt");
  if (!existsSync(caKey) || !existsSync(caCrt)) {
    const tmpKey = `${caKey}.tmp`;
    const tmpCrt = `${caCrt}.tmp`;
    await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", tmpKey]);
    await openssl([
      "req",
      "-x509",
      "-new",
      "-key",
      tmpKey,
      "-sha256",
      "-days",
      "3650",
      "-subj",
      "/CN=devkube-ca",
      "-out",
      tmpCrt,
    ]);
    await rename(tmpKey, caKey);
    await rename(tmpCrt, caCrt);
  }
  // Both leaf certificates: signed by the CA for 825 days (the most Apple's and browsers' clients accept).
  const signWithCa = (csr: string, extfile: string, out: string) =>
    openssl([
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      caCrt,
      "-CAkey",
      caKey,
      "-CAcreateserial",
      "-days",
      "825",
      "-sha256",
      "-extfile",
      extfile,
      "-out",
      out,
    ]);
  const srvKey = path.join(pki, "server.key");
  const srvCsr = path.join(pki, "server.csr");
  const srvCrt = path.join(pki, "server.crt");
  const ext = path.join(pki, "server.ext");
  const names = new Set(["localhost", "127.0.0.1", "::1", host]);
  const san = [...names]
    .filter((n) => n && n !== "0.0.0.0" && n !== "::")
    .map((n) => (isIP(n) ? `IP:${n}` : `DNS:${n}`));
  await writeFile(
    ext,
    `subjectAltName=${san.join(",")}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n`,
  );
  await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", srvKey]);
  await openssl(["req", "-new", "-key", srvKey, "-subj", "/CN=devkube", "-out", srvCsr]);
  await signWithCa(srvCsr, ext, srvCrt);
  // the kubeconfig's "cert" context: a client certificate for CN=devkube-admin, O=system:masters
  const cliKey = path.join(pki, "admin.key");
  const cliCrt = path.join(pki, "admin.crt");
  if (!existsSync(cliKey) || !existsSync(cliCrt)) {
    const cliCsr = path.join(pki, "admin.csr");
    const cliExt = path.join(pki, "admin.ext");
    await writeFile(cliExt, "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n");
    await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", `${cliKey}.tmp`]);
    await openssl([
      "req",
      "-new",
      "-key",
      `${cliKey}.tmp`,
      "-subj",
      "/O=system:masters/CN=devkube-admin",
      "-out",
      cliCsr,
    ]);
    await signWithCa(cliCsr, cliExt, `${cliCrt}.tmp`);
    await rename(`${cliKey}.tmp`, cliKey);
    await rename(`${cliCrt}.tmp`, cliCrt);
  }
  return {
    clientCert: await readFile(cliCrt, "utf8"),
    clientKey: await readFile(cliKey, "utf8"),
    caCert: await readFile(caCrt, "utf8"),
    serverCert: await readFile(srvCrt, "utf8"),
    serverKey: await readFile(srvKey, "utf8"),
  };
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run("openssl", args);
  } catch (err) {
    throw new Error(`cannot create devkube certificates: openssl ${args[0]} failed`, { cause: err });
  }
}
