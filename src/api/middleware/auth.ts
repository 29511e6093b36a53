import type { MiddlewareHandler } from "hono";
import { LOCAL_USER_ID } from "../../config";
import { ApiError } from "../../errors";
import { presentedKey, resolveApiKey } from "../../services/api-key-service";
import { sameSecret } from "../../services/ids";
import type { AppEnv } from "../app-env";

/** Sets `userId` to the caller, or answers 401. In single-user mode everyone is the local user. */
export function requireUser(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (c.var.config.authMode === "single-user") {
      c.set("userId", LOCAL_USER_ID);
      return next();
    }
    const key = presentedKey(c.req.raw.headers);
    if (key === null) {
      throw new ApiError("AUTH_REQUIRED", "Send an API key as 'Authorization: Bearer <key>'.", { "WWW-Authenticate": "Bearer" });
    }
    const userId = await resolveApiKey(c.env, key);
    if (userId === null) {
      throw new ApiError("INVALID_API_KEY", "The API key is not valid or has been revoked.", { "WWW-Authenticate": "Bearer" });
    }
    c.set("userId", userId);
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
