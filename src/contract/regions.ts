import { z } from "zod";

// The six regions of the API family (docs/decisions.md#request-bodies).
export const regionIds = [
  "us-east-1",
  "us-west-1",
  "eu-west-3",
  "eu-central-1",
  "ap-northeast-1",
  "ap-southeast-1",
] as const;
export const Region = z.enum(regionIds);
export type Region = z.infer<typeof Region>;

export const regionNames: Record<Region, string> = {
  "us-east-1": "US East (N. Virginia)",
  "us-west-1": "US West (N. California)",
  "eu-west-3": "Europe (Paris)",
  "eu-central-1": "Europe (Frankfurt)",
  "ap-northeast-1": "Asia Pacific (Tokyo)",
  "ap-southeast-1": "Asia Pacific (Singapore)",
};
