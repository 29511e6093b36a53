/**
 * The error-code registry: every error the API answers has one stable code, and each code has
 * exactly one HTTP status. The envelope is `{"detail": ..., "code": ...}` everywhere.
 */
export const ERROR_STATUS = {
  MALFORMED_JSON: 400,
  BAD_REQUEST: 400,
  AUTH_REQUIRED: 401,
  INVALID_API_KEY: 401,
  INVALID_ADMIN_TOKEN: 401,
  ADMIN_DISABLED: 403,
  FORBIDDEN: 403,
  ROUTE_NOT_FOUND: 404,
  USER_NOT_FOUND: 404,
  API_KEY_NOT_FOUND: 404,
  SANDBOX_SPEC_NOT_FOUND: 404,
  SANDBOX_NOT_FOUND: 404,
  CONVERSATION_NOT_FOUND: 404,
  START_TASK_NOT_FOUND: 404,
  PROVIDER_TOKEN_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  API_KEY_LIMIT_REACHED: 409,
  SANDBOX_NOT_RUNNING: 409,
  CONVERSATION_RUNNING: 409,
  GONE: 410,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  VALIDATION_ERROR: 422,
  UPGRADE_REQUIRED: 426,
  SANDBOX_LIMIT_REACHED: 429,
  INTERNAL_ERROR: 500,
  UPSTREAM_ERROR: 502,
  SERVICE_UNAVAILABLE: 503,
  PROVIDER_TOKENS_DISABLED: 503,
} as const satisfies Record<string, 400 | 401 | 403 | 404 | 405 | 409 | 410 | 413 | 415 | 422 | 426 | 429 | 500 | 502 | 503>;

export type ErrorCode = keyof typeof ERROR_STATUS;
export type ErrorStatus = (typeof ERROR_STATUS)[ErrorCode];

/** One entry of a FastAPI-style validation failure list. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
}

export interface ErrorBody {
  detail: string | ValidationIssue[];
  code: ErrorCode;
}

/** An expected failure the API answers with its code's status and the standard envelope. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly detail: string | ValidationIssue[];
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, detail: string | ValidationIssue[], headers: Record<string, string> = {}) {
    super(typeof detail === "string" ? detail : `${code}: ${detail.length} validation issue(s)`);
    this.name = "ApiError";
    this.code = code;
    this.detail = detail;
    this.headers = headers;
  }

  get status(): ErrorStatus {
    return ERROR_STATUS[this.code];
  }

  toBody(): ErrorBody {
    return { detail: this.detail, code: this.code };
  }
}

/** A 422 for one input location, written the way FastAPI writes it. */
export function validationError(loc: (string | number)[], msg: string, type = "value_error"): ApiError {
  return new ApiError("VALIDATION_ERROR", [{ loc, msg, type }]);
}
