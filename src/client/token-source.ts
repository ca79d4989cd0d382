/**
 * Where the bearer token comes from. The transport asks for a token before every attempt and
 * calls `renew` once after a 401, then retries once if it returned true.
 */
export interface TokenSource {
  /**
   * Who the credential is, for sharing a rate budget: the same identity means the same budget.
   * It may contain a token; the budget registry hashes it before keeping it.
   */
  readonly identity: string;
  getToken(signal?: AbortSignal): Promise<string>;
  /** After the service rejected `rejected`: fetch a fresh token; true when a retry may succeed. */
  renew(rejected: string, signal?: AbortSignal): Promise<boolean>;
}

export function staticTokenSource(token: string): TokenSource {
  return {
    identity: `token:${token}`,
    getToken: () => Promise.resolve(token),
    renew: () => Promise.resolve(false),
  };
}
