import type { MiddlewareHandler } from "hono";
import { readConfig } from "../../config";
import type { AppEnv } from "../app-env";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Gives every request an id (the caller's `X-Request-Id` when it is sane, else a new one),
 * echoes it on the answer, and writes one structured log line when the answer is ready.
 */
export function requestContext(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = Date.now();
    const incoming = c.req.header("X-Request-Id");
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set("requestId", requestId);
    c.set("config", readConfig(c.env));
    await next();
    c.header("X-Request-Id", requestId);
    console.log(
      JSON.stringify({
        level: c.res.status >= 500 ? "error" : "info",
        msg: "request",
        request_id: requestId,
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        duration_ms: Date.now() - started,
        user_id: c.get("userId") ?? null,
      }),
    );
  };
}
