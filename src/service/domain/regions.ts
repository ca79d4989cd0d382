import { regionIds, type Region } from "../../contract/index.ts";
import { enabledRegions } from "../config/config.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { ServiceError } from "../shared/errors.ts";
import { regionHasRoom } from "../placement/servers.ts";

// A region is available when this service has a PostgreSQL server for it that takes new databases (one neither
// draining nor full); creating in another one is 422.

/** The six regions of the family, in the contract's order. */
export async function regionAvailability(
  deps: Pick<ServiceDeps, "servers" | "pool">,
): Promise<{ id: Region; available: boolean }[]> {
  return Promise.all(regionIds.map(async (id) => ({ id, available: await regionHasRoom(deps, id) })));
}

/** The region a new project or database gets: the requested one, else `fallback` (`inherit`: the project's), else the first available. */
export function resolveRegion(deps: ServiceDeps, wanted: string | undefined, fallback: string | undefined): Region {
  const region = (wanted === undefined || wanted === "inherit" ? fallback : wanted) ?? enabledRegions(deps.config)[0];
  if (!region || !deps.servers.has(region as Region)) {
    throw new ServiceError(
      "region_unavailable",
      `region "${region}" is not available on this service`,
      `available regions: ${enabledRegions(deps.config).join(", ")}`,
    );
  }
  return region as Region;
}
