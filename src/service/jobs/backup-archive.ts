import { createCipheriv, createDecipheriv, createSecretKey, hkdfSync, randomBytes, type KeyObject } from "node:crypto";

// Backups at rest: a pg_dump archive sealed in a chunked AEAD stream (format "MDSBAK01"), so it is encrypted and
// authenticated without ever being held in memory whole, and every byte handed to pg_restore has been authenticated.
//
//   header  = "MDSBAK01" (8 bytes) ‖ salt (24 random bytes)
//   record  = flags (1 byte: 1 = final record, 0 = more follow) ‖ length (u32 BE, ≤ 64 KiB) ‖ ciphertext ‖ tag (16)
//   key     = HKDF-SHA256(ikm = service key, salt, info = "mds backup v1\0" ‖ context)   (context: the backup id)
//   cipher  = AES-256-GCM, nonce = 0x00000000 ‖ record number (u64 BE), AAD = header ‖ flags ‖ length
//
// The record number in the nonce detects reordered, repeated or dropped records; the final flag (authenticated)
// detects truncation at a record boundary; bytes after the final record are refused. A fresh salt per archive gives
// a fresh key, so nonces never repeat under one key. The context binds an archive to its backup: a file copied
// over another backup's does not open.

export const archiveMagic = Buffer.from("MDSBAK01");
const headerLength = 32;
const tagLength = 16;
export const recordPlaintextLength = 64 * 1024;
/** The first bytes of a plain pg_dump custom-format archive (backups taken before encryption). */
const plainMagic = Buffer.from("PGDMP");

export class ArchiveError extends Error {
  constructor(message: string) {
    super(`backup archive cannot be opened: ${message}`);
    this.name = "ArchiveError";
  }
}

/** A KeyObject, made once per archive: given as bytes, every record's cipher imported the key again. */
function archiveKey(serviceKey: Buffer, salt: Buffer, context: string): KeyObject {
  return createSecretKey(
    Buffer.from(
      hkdfSync("sha256", serviceKey, salt, Buffer.concat([Buffer.from("mds backup v1\0"), Buffer.from(context)]), 32),
    ),
  );
}

function nonce(sequence: number): Buffer {
  const n = Buffer.alloc(12);
  n.writeBigUInt64BE(BigInt(sequence), 4);
  return n;
}

function recordHead(final: boolean, length: number): Buffer {
  const head = Buffer.alloc(5);
  head[0] = final ? 1 : 0;
  head.writeUInt32BE(length, 1);
  return head;
}

/** Encrypts `plaintext` (any chunking) into the archive format, yielding bytes to write. */
export async function* sealArchive(
  plaintext: AsyncIterable<Buffer>,
  serviceKey: Buffer,
  context: string,
): AsyncGenerator<Buffer> {
  const header = Buffer.concat([archiveMagic, randomBytes(headerLength - archiveMagic.length)]);
  const key = archiveKey(serviceKey, header.subarray(archiveMagic.length), context);
  let sequence = 0;
  const seal = (data: Buffer, final: boolean): Buffer => {
    const head = recordHead(final, data.length);
    const cipher = createCipheriv("aes-256-gcm", key, nonce(sequence++));
    cipher.setAAD(Buffer.concat([header, head]));
    return Buffer.concat([head, cipher.update(data), cipher.final(), cipher.getAuthTag()]);
  };
  yield header;
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of plaintext) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    // Keep at least one byte back: the last record must carry the final flag, and only the end of input tells.
    while (pending.length > recordPlaintextLength) {
      yield seal(pending.subarray(0, recordPlaintextLength), false);
      pending = pending.subarray(recordPlaintextLength);
    }
  }
  yield seal(pending, true);
}

/**
 * Reads exact byte counts from a stream of chunks, copying only the `n` bytes of a read that straddles two chunks:
 * joining the rest of a chunk to the next one copied every 1 MiB read of a restore whole, once per record that
 * straddled it (a restore's runs read the archive in 1 MiB chunks of 64 KiB records).
 */
class ByteReader {
  private pending: Buffer = Buffer.alloc(0);
  private readonly iterator: AsyncIterator<Buffer>;
  constructor(source: AsyncIterable<Buffer>) {
    this.iterator = source[Symbol.asyncIterator]();
  }
  /** Exactly `n` bytes, or fewer only at the end of the stream. */
  async read(n: number): Promise<Buffer> {
    if (this.pending.length >= n) return this.take(n);
    const parts = [this.pending];
    let length = this.pending.length;
    while (length < n) {
      const next = await this.iterator.next();
      if (next.done) break;
      parts.push(next.value);
      length += next.value.length;
    }
    // The chunks are joined up to `n` bytes only; what lies past them in the last chunk stays a view of it.
    const last = parts.pop()!;
    const before = length - last.length;
    const fromLast = Math.max(0, Math.min(last.length, n - before));
    if (before === 0) {
      this.pending = last;
      return this.take(n);
    }
    const out = Buffer.concat([...parts, last.subarray(0, fromLast)], before + fromLast);
    this.pending = last.subarray(fromLast);
    return out;
  }
  private take(n: number): Buffer {
    const out = this.pending.subarray(0, n);
    this.pending = this.pending.subarray(out.length);
    return out;
  }
}

/**
 * Yields the authenticated plaintext of an archive, record by record: nothing is yielded before its record's tag
 * checked out. Throws ArchiveError on a wrong key or context, a changed, reordered, missing or extra record, or a
 * truncation. A plain pg_dump archive (written before backups were encrypted) is passed through when `allowPlain`;
 * its integrity then rests on the SHA-256 recorded in the control database, which the caller checks.
 */
export async function* openArchive(
  source: AsyncIterable<Buffer>,
  serviceKey: Buffer,
  context: string,
  options: { allowPlain: boolean },
): AsyncGenerator<Buffer> {
  const reader = new ByteReader(source);
  const header = await reader.read(headerLength);
  if (header.subarray(0, plainMagic.length).equals(plainMagic)) {
    if (!options.allowPlain) throw new ArchiveError("it is not encrypted");
    yield header;
    for (
      let chunk = await reader.read(recordPlaintextLength);
      chunk.length > 0;
      chunk = await reader.read(recordPlaintextLength)
    )
      yield chunk;
    return;
  }
  if (header.length < headerLength || !header.subarray(0, archiveMagic.length).equals(archiveMagic))
    throw new ArchiveError("unknown format");
  const key = archiveKey(serviceKey, header.subarray(archiveMagic.length), context);
  for (let sequence = 0; ; sequence++) {
    const head = await reader.read(5);
    if (head.length === 0) throw new ArchiveError("truncated (no final record)");
    if (head.length < 5) throw new ArchiveError("truncated record header");
    const final = head[0] === 1;
    const length = head.readUInt32BE(1);
    if (head[0]! > 1 || length > recordPlaintextLength) throw new ArchiveError("malformed record header");
    const body = await reader.read(length + tagLength);
    if (body.length < length + tagLength) throw new ArchiveError("truncated record");
    const decipher = createDecipheriv("aes-256-gcm", key, nonce(sequence));
    decipher.setAAD(Buffer.concat([header, head]));
    decipher.setAuthTag(body.subarray(length));
    let plaintext: Buffer;
    try {
      // GCM's final() yields nothing; it checks the tag, before a byte of the record is passed on.
      plaintext = decipher.update(body.subarray(0, length));
      decipher.final();
    } catch {
      throw new ArchiveError(`record ${sequence} failed authentication (wrong key, wrong backup, or changed data)`);
    }
    if (plaintext.length > 0) yield plaintext;
    if (final) break;
  }
  if ((await reader.read(1)).length > 0) throw new ArchiveError("data after the final record");
}
