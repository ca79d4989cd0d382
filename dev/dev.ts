import { parseArgs } from "node:util";
import path from "node:path";
import { startDevStack } from "./dev-stack.ts";

// `mds dev` (`npm start`): the whole local stack until Ctrl-C. See dev-stack.ts for what runs and where.

export const devHelp = `usage: mds dev [--dir <dir>]

Runs a private PostgreSQL, the service, devkube with the mds CRDs, a credentials Secret and the operator
(supervised: restarted when it dies). State lives in <dir> (default .mds) and survives restarts.
When ready it writes <dir>/env (KUBECONFIG, MDS_API_URL, MDS_TOKEN) and <dir>/activate. Ctrl-C stops everything.

  --dir <dir>   state directory (default .mds)`;

export function nextSteps(dir: string): string {
  const relative = path.relative(process.cwd(), dir);
  const rel = relative === "" ? "." : relative.startsWith("..") ? dir : relative;
  const steps: [string, string][] = [
    [`source ${rel}/activate`, "# KUBECONFIG, MDS_API_URL, MDS_TOKEN, and kubectl on PATH"],
    ["kubectl apply -f examples/", '# a Project "shop" and two Databases'],
    ["kubectl get mds", "# watch them become Ready"],
    ["kubectl get secret orders-db -o jsonpath='{.data.DATABASE_URL}' | base64 -d", ""],
  ];
  const width = Math.max(...steps.filter(([, c]) => c !== "").map(([cmd]) => cmd.length)) + 2;
  return [
    "",
    "Ready. In another terminal:",
    "",
    ...steps.map(([cmd, comment]) => `  ${comment === "" ? cmd : cmd.padEnd(width) + comment}`),
    "",
    `Then try a restore: docs/first-database.md. Logs: ${rel}/operator.log, ${rel}/service.log, ${rel}/devkube.log.`,
    "Press Ctrl-C to stop everything.",
  ].join("\n");
}

export async function runDev(argv: string[]): Promise<number> {
  let values: { dir?: string | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { dir: { type: "string" }, help: { type: "boolean", short: "h" } },
      strict: true,
    }));
  } catch (err) {
    console.error(`mds dev: ${err instanceof Error ? err.message : String(err)}\n\n${devHelp}`);
    return 2;
  }
  if (values.help) {
    console.log(devHelp);
    return 0;
  }
  const dir = path.resolve(values.dir ?? ".mds");
  const say = (line: string) => console.log(`mds dev: ${line}`);

  let stopRequested = false;
  let requestStop: () => void = () => undefined;
  const stopSignal = new Promise<void>((resolve) => (requestStop = resolve));
  const onSignal = () => {
    if (stopRequested) {
      console.error("mds dev: stopping immediately");
      process.exit(130);
    }
    stopRequested = true;
    console.log("\nmds dev: stopping (Ctrl-C again to force)");
    requestStop();
  };
  // SIGHUP too: a closed terminal must not leave PostgreSQL and the operator running without us.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);

  let stack;
  try {
    stack = await startDevStack({ dir, say });
  } catch (err) {
    console.error(`mds dev: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
  if (stopRequested) {
    await stack.stop();
    return 0;
  }
  console.log(nextSteps(dir));
  await stopSignal;
  await stack.stop();
  console.log("mds dev: stopped");
  return 0;
}
