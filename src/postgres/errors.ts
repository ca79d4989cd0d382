// Errors of the PostgreSQL runner. Messages say what is missing and how to fix it.
export class PostgresError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "PostgresError";
    this.code = code;
  }
}

export class PostgresNotFoundError extends PostgresError {
  constructor(message: string, options?: ErrorOptions) {
    super("postgres_not_found", message, options);
    this.name = "PostgresNotFoundError";
  }
}
