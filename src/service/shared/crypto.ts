import { createCipheriv, createDecipheriv, createHash, createHmac, pbkdf2, randomBytes } from "node:crypto";
import { promisify } from "node:util";

const pbkdf2Async = promisify(pbkdf2);

/** Tokens are 256-bit random strings: a plain SHA-256 is a safe, fast lookup hash for them. */
export function hashToken(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** A password that needs no escaping anywhere (letters and digits only), 32 characters. */
export function randomPassword(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  for (const b of randomBytes(32)) out += alphabet[b % alphabet.length];
  return out;
}

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for a password. Passing it to CREATE ROLE … PASSWORD means the
 * plaintext never leaves this process and never sits in the control database or a job.
 */
export async function scramVerifier(password: string, iterations = 4096): Promise<string> {
  const salt = randomBytes(16);
  // On the thread pool: 4096 rounds would otherwise block every other request for milliseconds.
  const salted = await pbkdf2Async(password.normalize("NFKC"), salt, iterations, 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}

/** AES-256-GCM with a random nonce: nonce ‖ tag ‖ ciphertext. Used for stored creation responses (they hold credentials). */
export function encrypt(key: Buffer, plaintext: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

export function decrypt(key: Buffer, sealed: Buffer): string {
  const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(0, 12));
  decipher.setAuthTag(sealed.subarray(12, 28));
  return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString("utf8");
}

export function sha256Hex(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Parses a 32-byte key given as base64/base64url (44/43 chars) or hex (64 chars). */
export function parseKey(text: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, "hex") : Buffer.from(t, "base64");
  if (key.length !== 32) throw new Error("an encryption key must be 32 bytes (64 hex characters or base64)");
  return key;
}
