import type { FastifyInstance } from "fastify";
import { regionNames } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { regionAvailability } from "../domain/regions.ts";

// GET /v1/regions/postgres, as the public API has it: the six regions of the family, `available` where this
// service has a PostgreSQL server for them that takes new databases (creating in an `unavailable` one is 422 region_unavailable).
export function regionRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/v1/regions/postgres", async () => ({
    data: (await regionAvailability(deps)).map(({ id, available }) => ({
      id,
      type: "region" as const,
      name: regionNames[id],
      status: available ? ("available" as const) : ("unavailable" as const),
    })),
  }));
}
