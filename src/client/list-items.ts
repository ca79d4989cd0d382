import type { z } from "zod";
import { callHook, type ClientHooks, type ClientLogger } from "./hooks.ts";

// List pages are read item by item: one object the client cannot read (a shape a newer server sends, a console-made
// object of a kind we do not know) is left out of its page, counted (`onSkippedItem`) and logged once, and never
// fails the page, so one foreign object cannot stop every reconcile that lists.

const maxRemembered = 1_000;

export function createItemReader(hooks: ClientHooks, logger: ClientLogger | undefined) {
  const logged = new Set<string>();
  return function readItems<T>(
    operation: string,
    items: unknown[],
    schema: z.ZodType<T>,
  ): { data: T[]; skipped: number } {
    const data: T[] = [];
    let skipped = 0;
    for (const item of items) {
      const parsed = schema.safeParse(item);
      if (parsed.success) {
        data.push(parsed.data);
        continue;
      }
      skipped++;
      callHook(hooks.onSkippedItem, { operation });
      const id = idOf(item);
      // Paths and reasons only: zod's messages do not quote values, and values may be secrets.
      const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(item)"}: ${i.message}`);
      const key = `${operation}\n${id ?? ""}\n${issues.join(";")}`;
      if (logged.has(key)) continue;
      if (logged.size >= maxRemembered) logged.clear();
      logged.add(key);
      logger?.warn({ operation, id, issues }, "Left an unreadable item out of a list page");
    }
    return { data, skipped };
  };
}

function idOf(item: unknown): string | undefined {
  if (typeof item !== "object" || item === null) return undefined;
  const id = (item as { id?: unknown }).id;
  return typeof id === "string" && id.length <= 64 && /^[A-Za-z0-9_-]+$/.test(id) ? id : undefined;
}
