import { swaggerUI } from "@hono/swagger-ui";
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { adminRouter } from "./api/admin";
import { appConversationsRouter } from "./api/app-conversations";
import { type AppEnv, newRouter } from "./api/app-env";
import { eventsRouter } from "./api/events";
import { liveEventsRouter } from "./api/live-events";
import { RouteTable } from "./api/method-not-allowed";
import { jsonBodyGuard } from "./api/middleware/body-guard";
import { requestContext } from "./api/middleware/request-context";
import { runtimeProxy, runtimeProxyDoc } from "./api/runtime-proxy";
import { sandboxSpecsRouter } from "./api/sandbox-specs";
import { sandboxesRouter } from "./api/sandboxes";
import { jsonContent } from "./api/schemas/common";
import { usersRouter } from "./api/users";
import { ApiError, type ErrorBody, type ErrorCode } from "./errors";

export const API_PREFIX = "/api/v1";
export const OPENAPI_PATH = `${API_PREFIX}/openapi.json`;
export const DOCS_PATH = `${API_PREFIX}/docs`;

const health = createRoute({
  method: "get",
  path: "/health",
  tags: ["Operations"],
  summary: "Liveness probe (no auth)",
  responses: { 200: jsonContent(z.object({ status: z.literal("ok") }), "The Worker answers") },
});

function errorResponse(c: Context<AppEnv>, error: ApiError): Response {
  for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
  return c.json(error.toBody(), error.status);
}

/** HTTP exceptions come from Hono's own helpers; the only 400 among them is unparseable JSON. */
function fromHttpException(error: HTTPException): ApiError {
  const byStatus: Partial<Record<number, ErrorCode>> = {
    400: "MALFORMED_JSON",
    401: "AUTH_REQUIRED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
  };
  const code = byStatus[error.status] ?? "BAD_REQUEST";
  const detail =
    code === "MALFORMED_JSON" ? "The request body is not valid JSON." : error.message || "The request could not be processed.";
  return new ApiError(code, detail);
}

export function createApp() {
  const api = newRouter();
  api.route("/sandbox-specs", sandboxSpecsRouter);
  api.route("/sandboxes", sandboxesRouter);
  // The live routes first: they authenticate themselves (see live-events.ts).
  api.route("/app-conversations", liveEventsRouter);
  api.route("/app-conversations", appConversationsRouter);
  api.route("/events", eventsRouter);
  api.all("/sandboxes/:sandbox_id/runtime/*", runtimeProxy);
  api.route("/", usersRouter);
  api.route("/admin", adminRouter);

  const app = newRouter();
  app.use("*", requestContext());
  app.use(`${API_PREFIX}/*`, jsonBodyGuard());
  app.openapi(health, (c) => c.json({ status: "ok" as const }, 200));
  app.route(API_PREFIX, api);

  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
    description: "An API key. `X-Session-API-Key: <key>` is accepted as well.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "sessionKey", {
    type: "apiKey",
    in: "header",
    name: "X-Session-API-Key",
    description: "A sandbox's session_api_key: grants that sandbox's runtime routes only.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    description: "The deployment's ADMIN_TOKEN secret (operator routes only).",
  });
  runtimeProxyDoc(app.openAPIRegistry, `${API_PREFIX}/sandboxes/{sandbox_id}/runtime/{path}`);
  app.doc31(OPENAPI_PATH, {
    openapi: "3.1.0",
    info: {
      title: "Agent platform API",
      version: "1.0.0",
      description: "The V1 app-server API: sandbox specs, sandboxes, app conversations and their events.",
    },
  });
  app.get(DOCS_PATH, swaggerUI({ url: OPENAPI_PATH, title: "Agent platform API" }));

  let routeTable: RouteTable | null = null;
  app.notFound((c) => {
    routeTable ??= new RouteTable(app.routes);
    const allowed = routeTable.allowed(c.req.path);
    if (allowed !== null) {
      c.header("Allow", allowed.join(", "));
      return errorResponse(
        c,
        new ApiError("METHOD_NOT_ALLOWED", `${c.req.method} is not allowed here; use ${allowed.join(", ")}.`),
      );
    }
    return errorResponse(c, new ApiError("ROUTE_NOT_FOUND", `No route for ${c.req.method} ${c.req.path}.`));
  });

  app.onError((error, c) => {
    if (error instanceof ApiError) return errorResponse(c, error);
    if (error instanceof HTTPException) return errorResponse(c, fromHttpException(error));
    const requestId = c.get("requestId") ?? "unknown";
    console.error(
      JSON.stringify({
        level: "error",
        msg: "unhandled error",
        request_id: requestId,
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        stack: error instanceof Error ? error.stack : undefined,
      }),
    );
    const body: ErrorBody = {
      detail: `Internal error; quote request id ${requestId} when reporting it.`,
      code: "INTERNAL_ERROR",
    };
    return c.json(body, 500);
  });

  return app;
}

export type App = ReturnType<typeof createApp>;
