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
  setFlagsFromString("--semi-space-growth-factor=1");
  setFlagsFromString("--heap-growing-percent=25");
  setFlagsFromString("--optimize-for-size");
  setFlagsFromString("--no-turbofan");
  setFlagsFromString("--no-maglev");
}

/**
 * The service's heap: young generation held at its initial size (semi-spaces of ~1 MB) and the old generation let grow
 * to 4 × what is live before a full collection. By default V8 grows the young generation under allocation (up to
 * 2 × 64 MB) and lets the old one grow to about 2 × live (here ~24 MB over ~24 MB): with a young generation larger
 * than that headroom, V8 started an incremental full collection every few MB of a restore's buffers (14-17 per
 * 50-table restore, ~0.5 s of the service's CPU on two cores, taken from pg_restore and PostgreSQL). Holding the young
 * generation alone fixed the first restore, but objects then got promoted sooner and after a clone the old
 * generation filled its headroom again (15 full collections); with 4 × live, 0-2. The cost: up to ~75 MB more heap
 * before a full collection, on a service whose live heap is ~25 MB. Measured in
 * bench/history/2026-11-26-restore-split.md. The same as starting node with `--semi-space-growth-factor=1
 * --heap-growing-percent=300`; before modules load, so nothing has grown yet.
 */
export function serviceHeapFlags(): void {
  setFlagsFromString("--semi-space-growth-factor=1");
  setFlagsFromString("--heap-growing-percent=300");
}
