import { z } from "zod";

// Every error code and the HTTP status that carries it (docs/decisions.md#errors).
export const errorStatus = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unprocessable: 422,
  region_unavailable: 422,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
} as const;
export type ErrorCode = keyof typeof errorStatus;

export const ErrorBody = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    hint: z.string(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

export function errorBody(code: ErrorCode, message: string, hint = ""): ErrorBody {
  return { error: { code, message, hint } };
}
