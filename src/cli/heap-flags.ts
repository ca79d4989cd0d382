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
