import type { DatabaseOverrides, Json } from "./rules.ts";

// Objects someone made in the console, in the same workspace as the operator's: legal public-API shapes our own
// service never sends (SDK ~7683-7745, ~8671, ~9563). The operator must list past them and never touch them.

const base = "https://api.prisma.io/v1";
const project = {
  id: "proj_cforeignconsole0000000000",
  url: `${base}/projects/proj_cforeignconsole0000000000`,
  name: "made in the console",
};
const cloned = "db_cforeignclone00000000000000";

export const foreignDatabase: Json = {
  id: cloned,
  type: "database",
  url: `${base}/databases/${cloned}`,
  name: "console clone",
  status: "ready",
  createdAt: "2020-01-01T00:00:00.000Z",
  isDefault: false,
  defaultConnectionId: null,
  connections: [
    {
      id: "con_cforeignaccelerate000000000",
      type: "connection",
      url: `${base}/connections/con_cforeignaccelerate000000000`,
      name: "accelerate",
      createdAt: "2020-01-01T00:00:00.000Z",
      kind: "accelerate",
      endpoints: { accelerate: { host: "accelerate.example.invalid", port: 443 } },
      directConnection: null,
      database: { id: cloned, url: `${base}/databases/${cloned}`, name: "console clone" },
    },
  ],
  project,
  region: null,
  source: { type: "database", databaseId: "db_cforeignorigin0000000000000" },
  branchId: null,
  logicalId: null,
};

export const foreignProject: Json = {
  ...project,
  type: "project",
  createdAt: "2020-01-01T00:00:00.000Z",
  defaultRegion: null,
  logicalId: null,
  workspace: {
    id: "wksp_cforeignworkspace00000000000",
    url: `${base}/workspaces/wksp_cforeignworkspace00000000000`,
    name: "console",
  },
};

export const foreignBackup: Json = {
  id: "bkp_cforeignincremental000000000",
  type: "backup",
  backupType: "incremental",
  status: "unknown",
  createdAt: "2020-01-01T00:00:00.000Z",
};

/** Objects of the upstream service shown with foreign-looking fields (none today; the clone above is synthetic). */
export const foreignOverrides: DatabaseOverrides = new Map();
