import { createRoute, z } from "@hono/zod-openapi";
import { getSandboxSpecs, searchSandboxSpecs } from "../services/sandbox-spec-service";
import { newRouter } from "./app-env";
import { requireUser } from "./middleware/auth";
import { batchIdsSchema, errorResponses, jsonContent, PageQuerySchema, pageSchema } from "./schemas/common";
import { SandboxSpecInfoSchema } from "./schemas/sandbox-specs";

const security = [{ bearer: [] }];

const search = createRoute({
  method: "get",
  path: "/search",
  tags: ["Sandbox specs"],
  summary: "Search the sandbox specs, default first",
  security,
  request: { query: PageQuerySchema },
  responses: {
    200: jsonContent(pageSchema(SandboxSpecInfoSchema, "SandboxSpecInfoPage"), "A page of specs"),
    ...errorResponses(),
  },
});

const batchGet = createRoute({
  method: "get",
  path: "/",
  tags: ["Sandbox specs"],
  summary: "Get sandbox specs by id, in request order, null where unknown",
  security,
  request: { query: z.object({ id: batchIdsSchema("Spec ids (repeat the parameter), at most 100.") }) },
  responses: { 200: jsonContent(z.array(SandboxSpecInfoSchema.nullable()), "The specs"), ...errorResponses() },
});

const router = newRouter();
router.use("*", requireUser());

export const sandboxSpecsRouter = router
  .openapi(search, (c) => {
    const { limit, page_id } = c.req.valid("query");
    return c.json(searchSandboxSpecs(limit, page_id), 200);
  })
  .openapi(batchGet, (c) => c.json(getSandboxSpecs(c.req.valid("query").id), 200));
