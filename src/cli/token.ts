import { parseArgs } from "node:util";
import { withEmbeddedControl } from "../service/embedded/stack.ts";
import { createServiceToken, listServiceTokens, revokeToken } from "../service/index.ts";
import { migrate } from "../service/store/migrate.ts";
import { createPool } from "../service/store/pool.ts";

export const tokenUsage = `usage:
  mds token create --workspace NAME [--scopes "workspace:admin offline_access"] [--name LABEL] (--embedded DIR | --database-url URL)
  mds token list [--workspace NAME] (--embedded DIR | --database-url URL)
  mds token revoke TOKEN_ID (--embedded DIR | --database-url URL)

The control database comes from --embedded DIR (the directory of \`mds service --embedded\`; works while it runs)
or --database-url / MDS_DATABASE_URL. \`create\` prints the new token as the last line; it is shown only once.
`;

async function withControl<T>(
  embedded: string | undefined,
  databaseUrl: string | undefined,
  fn: (url: string) => Promise<T>,
): Promise<T> {
  if (embedded) return withEmbeddedControl(embedded, fn);
  if (databaseUrl) return fn(databaseUrl);
  throw new Error("no control database: pass --embedded DIR or --database-url URL (or set MDS_DATABASE_URL)");
}

export async function runToken(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        workspace: { type: "string" },
        scopes: { type: "string" },
        name: { type: "string" },
        embedded: { type: "string" },
        "database-url": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    console.error(`mds token: ${(err as Error).message}\n\n${tokenUsage}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [action, ...rest] = positionals;
  if (values.help || !action) {
    console.log(tokenUsage);
    return values.help ? 0 : 2;
  }
  const databaseUrl = values["database-url"] ?? process.env.MDS_DATABASE_URL;
  const run = <T>(fn: (db: import("pg").Pool) => Promise<T>) =>
    withControl(values.embedded, databaseUrl, async (url) => {
      const pool = createPool(url, 2);
      try {
        await migrate(pool);
        return await fn(pool);
      } finally {
        await pool.end();
      }
    });
  switch (action) {
    case "create": {
      if (!values.workspace || !/^[A-Za-z0-9._-]{1,64}$/.test(values.workspace)) {
        console.error(`mds token create: --workspace NAME is required (1-64 of A-Z a-z 0-9 . _ -)\n\n${tokenUsage}`);
        return 2;
      }
      const scopes = values.scopes?.split(/[\s,]+/).filter(Boolean);
      const workspace = values.workspace;
      const created = await run((db) =>
        createServiceToken(db, {
          workspace,
          ...(scopes ? { scopes } : {}),
          ...(values.name ? { name: values.name } : {}),
        }),
      );
      console.error(
        `created token ${created.id} for workspace "${workspace}" (${created.workspaceId}); it is shown only once:`,
      );
      console.log(created.token);
      return 0;
    }
    case "list": {
      const tokens = await run((db) => listServiceTokens(db, values.workspace));
      for (const t of tokens)
        console.log(
          [t.id, t.workspace, t.revoked ? "revoked" : "active", t.scopes.join(" "), t.createdAt, t.name].join("\t"),
        );
      return 0;
    }
    case "revoke": {
      const id = rest[0];
      if (!id) {
        console.error(`mds token revoke: which token? pass its id (see mds token list)\n\n${tokenUsage}`);
        return 2;
      }
      const found = await run((db) => revokeToken(db, id));
      if (!found) {
        console.error(`mds token revoke: no token "${id}"`);
        return 1;
      }
      console.log(`revoked ${id}`);
      return 0;
    }
    default:
      console.error(`mds token: unknown action "${action}"\n\n${tokenUsage}`);
      return 2;
  }
}
