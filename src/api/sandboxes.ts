import { createRoute, z } from "@hono/zod-openapi";
import {
  countSandboxes,
  deleteSandbox,
  getSandboxes,
  pauseSandbox,
  resumeSandbox,
  searchSandboxes,
  startSandbox,
  toSandboxInfo,
} from "../services/sandbox-service";
import { newRouter } from "./app-env";
import { requireUser } from "./middleware/auth";
import { isRuntimeProxyPath } from "./runtime-proxy";
import { batchIdsSchema, errorResponses, jsonContent, PageQuerySchema, pageSchema, SuccessSchema } from "./schemas/common";
import { SandboxIdSchema, SandboxInfoSchema, StartSandboxRequestSchema, StatusFilterSchema } from "./schemas/sandboxes";

const security = [{ bearer: [] }];
const tags = ["Sandboxes"];
const idParams = z.object({ sandbox_id: SandboxIdSchema });

const search = createRoute({
  method: "get",
  path: "/search",
  tags,
  summary: "Search the caller's sandboxes, newest first",
  security,
  request: { query: PageQuerySchema.extend(StatusFilterSchema.shape) },
  responses: { 200: jsonContent(pageSchema(SandboxInfoSchema, "SandboxInfoPage"), "A page of sandboxes"), ...errorResponses() },
});

const count = createRoute({
  method: "get",
  path: "/count",
  tags,
  summary: "Count the caller's sandboxes",
  security,
  request: { query: StatusFilterSchema },
  responses: { 200: jsonContent(z.number().int(), "The count"), ...errorResponses() },
});

const batchGet = createRoute({
  method: "get",
  path: "/",
  tags,
  summary: "Get sandboxes by id, in request order, null where unknown or not the caller's",
  security,
  request: { query: z.object({ id: batchIdsSchema("Sandbox ids (repeat the parameter), at most 100.") }) },
  responses: { 200: jsonContent(z.array(SandboxInfoSchema.nullable()), "The sandboxes"), ...errorResponses() },
});

const start = createRoute({
  method: "post",
  path: "/",
  tags,
  summary: "Start a sandbox from a spec (query or body `sandbox_spec_id`; neither: the default spec)",
  security,
  request: {
    query: z.object({ sandbox_spec_id: z.string().min(1).max(64).optional() }),
    body: { content: { "application/json": { schema: StartSandboxRequestSchema } }, required: false },
  },
  responses: { 200: jsonContent(SandboxInfoSchema, "The sandbox, usually STARTING"), ...errorResponses(400, 404, 413, 415, 429) },
});

const pause = createRoute({
  method: "post",
  path: "/{sandbox_id}/pause",
  tags,
  summary: "Pause: snapshot the workspace to storage, then stop. Idempotent.",
  security,
  request: { params: idParams },
  responses: { 200: jsonContent(SuccessSchema, "Paused"), ...errorResponses(404) },
});

const resume = createRoute({
  method: "post",
  path: "/{sandbox_id}/resume",
  tags,
  summary: "Resume: start again and restore the workspace before RUNNING. Idempotent.",
  security,
  request: { params: idParams },
  responses: { 200: jsonContent(SuccessSchema, "Resuming"), ...errorResponses(404, 429) },
});

const remove = createRoute({
  method: "delete",
  path: "/{sandbox_id}",
  tags,
  summary: "Delete the sandbox, its runtime and its snapshot",
  security,
  request: { params: idParams },
  responses: { 200: jsonContent(SuccessSchema, "Deleted"), ...errorResponses(404) },
});

const router = newRouter();
router.use("*", async (c, next) => {
  // The runtime proxy authenticates with the sandbox's session key instead (see app.ts).
  if (isRuntimeProxyPath(c.req.path)) return next();
  return requireUser()(c, next);
});

const origin = (url: string) => new URL(url).origin;

export const sandboxesRouter = router
  .openapi(search, async (c) => {
    const { status__eq, limit, page_id } = c.req.valid("query");
    const page = await searchSandboxes(c.env, c.var.userId, status__eq, limit, page_id);
    return c.json(
      { items: page.items.map((record) => toSandboxInfo(record, origin(c.req.url))), next_page_id: page.next_page_id },
      200,
    );
  })
  .openapi(count, async (c) => c.json(await countSandboxes(c.env, c.var.userId, c.req.valid("query").status__eq), 200))
  .openapi(batchGet, async (c) => {
    const records = await getSandboxes(c.env, c.var.userId, c.req.valid("query").id);
    return c.json(
      records.map((record) => (record === null ? null : toSandboxInfo(record, origin(c.req.url)))),
      200,
    );
  })
  .openapi(start, async (c) => {
    const specId = c.req.valid("query").sandbox_spec_id ?? c.req.valid("json")?.sandbox_spec_id;
    const record = await startSandbox(c.env, c.var.config, c.var.userId, specId);
    return c.json(toSandboxInfo(record, origin(c.req.url)), 200);
  })
  .openapi(pause, async (c) => {
    await pauseSandbox(c.env, c.var.userId, c.req.valid("param").sandbox_id);
    return c.json({ success: true as const }, 200);
  })
  .openapi(resume, async (c) => {
    await resumeSandbox(c.env, c.var.config, c.var.userId, c.req.valid("param").sandbox_id);
    return c.json({ success: true as const }, 200);
  })
  .openapi(remove, async (c) => {
    await deleteSandbox(c.env, c.var.userId, c.req.valid("param").sandbox_id);
    return c.json({ success: true as const }, 200);
  });
