import { duration, type KindSetting } from "../kit/settings.ts";

// A restore's or a backup's request carries an Idempotency-Key; an API that announced replay answers a re-send
// within its window (the service's: 24 h) with the first answer instead of running it again. Past the window a
// re-send would run it a second time, so an interrupted request whose outcome is unknown is re-sent only within it.

/** The default: an hour under the service's 24 h, for the clocks' drift and the time a re-send takes. */
export const defaultReplayWindowMs = 23 * 3_600_000;

/** The `--<what>-replay-window` setting of a kind whose requests the API replays. */
export function replayWindowSetting(what: "restore" | "backup"): KindSetting<number> {
  return {
    flag: `${what}-replay-window`,
    env: `MDS_${what.toUpperCase()}_REPLAY_WINDOW`,
    help: `how long after requestedAt a ${what} interrupted by a restart or a lost answer is re-sent with its Idempotency-Key, to an API that announced replay (default 23h, at most 24h, the service's replay window); past it the ${what} is Failed with reason OutcomeUnknown. Shorten it only for an API that replays for less time`,
    parse: duration(0, 86_400_000),
  };
}
