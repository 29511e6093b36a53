import { createRoute, z } from "@hono/zod-openapi";
import { createApiKey } from "../services/api-key-service";
import { createUser, getUser } from "../services/user-service";
import { newRouter } from "./app-env";
import { requireAdmin } from "./middleware/auth";
import { errorResponses, jsonContent } from "./schemas/common";
import { CreateApiKeyRequestSchema, CreatedApiKeySchema, CreatedUserSchema, CreateUserRequestSchema } from "./schemas/users";

const security = [{ adminToken: [] }];

const createUserRoute = createRoute({
  method: "post",
  path: "/users",
  tags: ["Operator"],
  summary: "Create a user and their first API key (ADMIN_TOKEN)",
  security,
  request: { body: { content: { "application/json": { schema: CreateUserRequestSchema } }, required: true } },
  responses: { 201: jsonContent(CreatedUserSchema, "The user and their first key"), ...errorResponses(400, 413, 415) },
});

const createUserKey = createRoute({
  method: "post",
  path: "/users/{user_id}/api-keys",
  tags: ["Operator"],
  summary: "Issue another API key to an existing user, e.g. one who lost theirs (ADMIN_TOKEN)",
  security,
  request: {
    params: z.object({ user_id: z.string().min(1).max(64) }),
    body: { content: { "application/json": { schema: CreateApiKeyRequestSchema } }, required: false },
  },
  responses: { 201: jsonContent(CreatedApiKeySchema, "The new key"), ...errorResponses(400, 404, 409, 413, 415) },
});

const router = newRouter();
router.use("*", requireAdmin());

export const adminRouter = router
  .openapi(createUserRoute, async (c) => {
    const body = c.req.valid("json");
    const user = await createUser(c.env, { name: body.name, email: body.email });
    const apiKey = await createApiKey(c.env, user.id, body.api_key_name);
    return c.json({ user, api_key: apiKey }, 201);
  })
  .openapi(createUserKey, async (c) => {
    const user = await getUser(c.env, c.req.valid("param").user_id);
    const { name } = CreateApiKeyRequestSchema.parse(c.req.valid("json") ?? {});
    return c.json(await createApiKey(c.env, user.id, name), 201);
  });
