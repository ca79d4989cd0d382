import type { PrinterColumn } from "./crd.ts";

// Printer columns every kind shows (kubectl get): its conditions and its age.

export const condition = (type: string): PrinterColumn => ({
  name: type.toUpperCase(),
  type: "string",
  jsonPath: `.status.conditions[?(@.type=="${type}")].status`,
  description: `The ${type} condition's status.`,
});
export const age: PrinterColumn = {
  name: "AGE",
  type: "date",
  jsonPath: ".metadata.creationTimestamp",
  description: "Age.",
};
