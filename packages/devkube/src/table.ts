import { evaluateJsonPath } from "./jsonpath.ts";
import type { PrinterColumn, ResourceType, TableColumn } from "./resource-type.ts";
import { isObj, metaOf, type Obj } from "./types.ts";

/** apimachinery's duration.HumanDuration, which kubectl users know from the AGE column. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.floor(hours / 24) % 365;
    return dy === 0 ? `${Math.floor(hours / 24 / 365)}y` : `${Math.floor(hours / 24 / 365)}y${dy}d`;
  }
  return `${Math.floor(hours / 24 / 365)}y`;
}

export function age(obj: Obj, now: Date): string {
  const ts = metaOf(obj)["creationTimestamp"];
  if (typeof ts !== "string") return "<unknown>";
  return humanDuration(now.getTime() - Date.parse(ts));
}

export const NAME_COLUMN: TableColumn = {
  name: "Name",
  type: "string",
  format: "name",
  description:
    "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
  priority: 0,
};
export const AGE_COLUMN: TableColumn = {
  name: "Age",
  type: "date",
  format: "",
  description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
  priority: 0,
};

export function column(name: string, type = "string", description = "", priority = 0): TableColumn {
  return { name, type, format: "", description, priority };
}

interface TableShape {
  columns: TableColumn[];
  cells(obj: Obj, now: Date): unknown[];
}

/** Column definitions and cell values for one resource type: built-in printer or CRD printer columns. */
function tableShape(rt: ResourceType): TableShape {
  if (rt.table) return rt.table;
  const printer =
    rt.printerColumns && rt.printerColumns.length > 0
      ? rt.printerColumns
      : [{ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp", description: AGE_COLUMN.description }];
  return {
    columns: [
      NAME_COLUMN,
      ...printer.map((c) => ({
        name: c.name,
        type: c.type,
        format: c.format ?? "",
        description: c.description ?? "",
        priority: c.priority ?? 0,
      })),
    ],
    cells: (obj, now) => [metaOf(obj)["name"], ...printer.map((c) => printerCell(c, obj, now))],
  };
}

function printerCell(c: PrinterColumn, obj: Obj, now: Date): unknown {
  const values = evaluateJsonPath(c.jsonPath, obj);
  if (values.length === 0) return null;
  const v = values[0];
  switch (c.type) {
    case "date":
      return typeof v === "string" && !Number.isNaN(Date.parse(v))
        ? humanDuration(now.getTime() - Date.parse(v))
        : null;
    case "integer":
      return typeof v === "number" ? Math.trunc(v) : null;
    case "number":
      return typeof v === "number" ? v : null;
    case "boolean":
      return typeof v === "boolean" ? v : null;
    default:
      return values.map((x) => (isObj(x) || Array.isArray(x) ? JSON.stringify(x) : String(x))).join(" ");
  }
}

export type IncludeObject = "None" | "Metadata" | "Object";

function tableRow(shape: TableShape, obj: Obj, include: IncludeObject, now: Date): Obj {
  const row: Obj = { cells: shape.cells(obj, now) };
  if (include === "Object") row["object"] = obj;
  else if (include === "Metadata")
    row["object"] = { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: obj["metadata"] };
  return row;
}

export function buildTable(
  rt: ResourceType,
  objects: Obj[],
  include: IncludeObject,
  resourceVersion: string,
  withHeaders: boolean,
  extraMeta?: Obj,
): Obj {
  const now = new Date();
  const shape = tableShape(rt);
  const table: Obj = { kind: "Table", apiVersion: "meta.k8s.io/v1", metadata: { resourceVersion, ...extraMeta } };
  table["columnDefinitions"] = withHeaders ? shape.columns : [];
  table["rows"] = objects.map((o) => tableRow(shape, o, include, now));
  return table;
}
