import type { MiddlewareHandler } from "hono";
import { LOCAL_USER_ID } from "../../config";
import { ApiError } from "../../errors";
import { resolveApiKey } from "../../services/api-key-service";
import { sha256Hex } from "../../services/ids";
import { ensureLocalUser } from "../../services/user-service";
import type { AppEnv } from "../app-env";

/**
 * The credential a request presents: `Authorization: Bearer`, else `X-Session-API-Key`.
 * Null when it presents none; "" when its Authorization header is not a bearer token, which no
 * key or token matches.
 */
export function presentedKey(headers: Headers): string | null {
  const authorization = headers.get("Authorization");
  if (authorization !== null) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match?.[1] ?? "";
  }
  const sessionKey = headers.get("X-Session-API-Key")?.trim();
  return sessionKey ? sessionKey : null;
}

/** Sets `userId` to the caller, or answers 401. In single-user mode everyone is the local user. */
export function requireUser(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (c.var.config.authMode === "single-user") {
      await ensureLocalUser(c.env);
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

async function sameSecret(a: string, b: string): Promise<boolean> {
  // Compare digests so that the comparison's time says nothing about the secret's length or prefix.
  const [x, y] = await Promise.all([sha256Hex(a), sha256Hex(b)]);
  const encoder = new TextEncoder();
  return crypto.subtle.timingSafeEqual(encoder.encode(x), encoder.encode(y));
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
