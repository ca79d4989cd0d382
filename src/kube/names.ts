import { z } from "zod";

// Kubernetes names as zod schemas, for the CRDs: an object name (DNS subdomain) and a Secret data key.

export const objectName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);

export const secretKey = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[-._a-zA-Z0-9]+$/);
