import { setFlagsFromString } from "node:v8";

/**
 * Keeps V8's heap close to what is live. By default Node 24 grows the young generation to 2 × 64 MB under
 * allocation bursts (a resync, a thousand Databases applied at once) and lets the old generation grow to several
 * times the live size; pages V8 touched once stay in the RSS. Measured with bench/operator-rss.ts at 1,000 live
 * Databases: 354 MB RSS for a live heap of 40 MB by default; 263 MB with the young generation held at its initial
 * ~2 MB; 170 MB with the old generation also growing by only 25 % over live; 127 MB with --optimize-for-size too
 * (smaller code and heap). No measurable slowdown of the 1,000-Database ramp (22-28 s either way). The same as
 * starting node with `--max-semi-space-size=1 --heap-growing-percent=25 --optimize-for-size`.
 *
 * Only V8's interpreter and its baseline compiler (Sparkplug) run the operator's code: neither optimizing compiler
 * (TurboFan, Maglev). The operator waits on the network; what it computes (JSON of the informers, zod checks, the
 * queue) is light, while the optimizing compilers' code in the node binary and their compile zones are RSS.
 * Measured in bench/history/2026-11-26-operator-memory.md.
 */
export function limitHeapGrowth(): void {
  holdYoungGeneration();
  setFlagsFromString("--heap-growing-percent=25");
  setFlagsFromString("--optimize-for-size");
  setFlagsFromString("--no-turbofan");
  setFlagsFromString("--no-maglev");
}

/**
 * The service's young generation held at its initial size (semi-spaces of ~1 MB), as the operator's is. Grown (the
 * default, up to 2 × 64 MB after any burst of allocation), it is larger than the old generation's headroom (V8 lets
 * the old generation grow to about twice what is live, here ~24 MB over ~24 MB), and V8 then starts an incremental
 * mark-compact of the whole heap every few MB: a restore's lanes (Node decrypting 46 MB per lane and writing it into
 * pg_restore's pipes) ran 14 full collections, 0.5 s of the service's CPU on a 2-core machine, taken from pg_restore
 * and PostgreSQL. Held, they run 1 and minor collections (bench/history/2026-11-26-restore-split.md). The same as
 * starting node with `--semi-space-growth-factor=1`; before modules load, so nothing has grown it yet.
 */
export function holdYoungGeneration(): void {
  setFlagsFromString("--semi-space-growth-factor=1");
}
