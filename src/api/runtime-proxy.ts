import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { ApiError } from "../errors";
import { proxyToRuntime } from "../services/sandbox-service";
import type { AppEnv } from "./app-env";
import { ErrorSchema } from "./schemas/common";
import { SandboxIdSchema } from "./schemas/sandboxes";

/** Paths the runtime proxy serves: they carry the runtime's own bodies and credentials. */
const RUNTIME_PROXY_PATH = /^\/api\/v1\/sandboxes\/[^/]+\/runtime\//;

export function isRuntimeProxyPath(path: string): boolean {
  return RUNTIME_PROXY_PATH.test(path);
}

/**
 * `/api/v1/sandboxes/{sandbox_id}/runtime/...`: the sandbox's `AGENT_SERVER` URL. Everything
 * after `/runtime` is the runtime's own API (container/README.md), streamed both ways.
 */
export async function runtimeProxy(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("sandbox_id") ?? "";
  if (!SandboxIdSchema.safeParse(id).success) throw new ApiError("SANDBOX_NOT_FOUND", "No sandbox with this id.");
  const pathname = new URL(c.req.url).pathname;
  const marker = `/sandboxes/${id}/runtime`;
  const runtimePath = pathname.slice(pathname.indexOf(marker) + marker.length) || "/";
  return proxyToRuntime(c.env, c.var.config, c.req.raw, id, runtimePath);
}

/** Documents the proxy, which is one catch-all route rather than a schema-validated one. */
export function runtimeProxyDoc(registry: OpenAPIHono["openAPIRegistry"], path: string): void {
  for (const method of ["get", "post", "put", "delete"] as const) {
    registry.registerPath({
      method,
      path,
      tags: ["Sandbox runtime"],
      summary: `${method.toUpperCase()} to the sandbox runtime's API (see container/README.md); authenticated by the sandbox's session_api_key`,
      security: [{ sessionKey: [] }, { bearer: [] }],
      request: {
        params: z.object({ sandbox_id: SandboxIdSchema, path: z.string().openapi({ param: { name: "path", in: "path" } }) }),
      },
      responses: {
        200: { description: "The runtime's answer, streamed" },
        401: { description: "Missing or wrong key", content: { "application/json": { schema: ErrorSchema } } },
        404: { description: "Unknown sandbox", content: { "application/json": { schema: ErrorSchema } } },
        409: { description: "The sandbox is not RUNNING", content: { "application/json": { schema: ErrorSchema } } },
        502: { description: "The runtime did not answer", content: { "application/json": { schema: ErrorSchema } } },
      },
    });
  }
}
