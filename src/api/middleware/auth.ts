import type { Context, MiddlewareHandler } from "hono";
import { LOCAL_USER_ID } from "../../config";
import { ApiError } from "../../errors";
import { presentedKey, resolveApiKey } from "../../services/api-key-service";
import { sameSecret } from "../../services/ids";
import type { AppEnv } from "../app-env";

/**
 * The caller, or a 401 ApiError. In single-user mode everyone is the local user. With
 * `queryKey`, a `session_api_key` query parameter is accepted too (a browser cannot set headers
 * on a WebSocket or an EventSource); the request log never records query strings.
 */
export async function authenticate(c: Context<AppEnv>, options: { queryKey?: boolean } = {}): Promise<string> {
  if (c.var.config.authMode === "single-user") return LOCAL_USER_ID;
  const key = presentedKey(c.req.raw.headers) ?? (options.queryKey ? c.req.query("session_api_key")?.trim() || null : null);
  if (key === null) {
    throw new ApiError("AUTH_REQUIRED", "Send an API key as 'Authorization: Bearer <key>'.", { "WWW-Authenticate": "Bearer" });
  }
  const userId = await resolveApiKey(c.env, key);
  if (userId === null) {
    throw new ApiError("INVALID_API_KEY", "The API key is not valid or has been revoked.", { "WWW-Authenticate": "Bearer" });
  }
  return userId;
}

/** Sets `userId` to the caller, or answers 401. */
export function requireUser(options: { queryKey?: boolean } = {}): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    c.set("userId", await authenticate(c, options));
    return next();
  };
}

/** Operator routes: the `ADMIN_TOKEN` secret as a bearer token; 403 when no token is configured. */
export function requireAdmin(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const configured = c.env.ADMIN_TOKEN ?? "";
    if (configured.length === 0) {
      throw new ApiError("ADMIN_DISABLED", "Operator routes are disabled: set the ADMIN_TOKEN secret to enable them.");
    }
    const presented = presentedKey(c.req.raw.headers);
    if (presented === null || !(await sameSecret(presented, configured))) {
      throw new ApiError("INVALID_ADMIN_TOKEN", "Send the operator's ADMIN_TOKEN as 'Authorization: Bearer <token>'.", {
        "WWW-Authenticate": "Bearer",
      });
    }
    return next();
  };
}
