import { isObj, type Obj } from "./types.ts";

// core/v1 Event is the storage form; events.k8s.io/v1 is a view of it (kube's conversion.go).
const RENAMES: [string, string][] = [
  ["regarding", "involvedObject"],
  ["note", "message"],
  ["deprecatedSource", "source"],
  ["deprecatedFirstTimestamp", "firstTimestamp"],
  ["deprecatedLastTimestamp", "lastTimestamp"],
  ["deprecatedCount", "count"],
  ["reportingController", "reportingComponent"],
];
const SHARED = ["metadata", "eventTime", "series", "action", "reason", "related", "type", "reportingInstance"];

export function eventsV1ToCore(obj: Obj): Obj {
  const out: Obj = { apiVersion: "v1", kind: "Event" };
  for (const k of SHARED) if (obj[k] !== undefined) out[k] = obj[k];
  for (const [v1, core] of RENAMES) if (obj[v1] !== undefined) out[core] = obj[v1];
  if (!isObj(out["involvedObject"])) out["involvedObject"] = {};
  return out;
}

export function coreToEventsV1(obj: Obj): Obj {
  const out: Obj = { apiVersion: "events.k8s.io/v1", kind: "Event" };
  for (const k of SHARED) if (obj[k] !== undefined) out[k] = obj[k];
  for (const [v1, core] of RENAMES) if (obj[core] !== undefined) out[v1] = obj[core];
  return out;
}
