import { createRoute, z } from "@hono/zod-openapi";
import { createApiKey, listApiKeys, revokeApiKey } from "../services/api-key-service";
import { deleteProviderToken, listProviderTokens, putProviderToken } from "../services/provider-token-service";
import { getUser } from "../services/user-service";
import { newRouter } from "./app-env";
import { requireUser } from "./middleware/auth";
import { errorResponses, jsonContent, PageQuerySchema, pageSchema, SuccessSchema } from "./schemas/common";
import { GitProviderSchema, ProviderTokenInfoSchema, ProviderTokenRequestSchema } from "./schemas/conversations";
import { ApiKeyInfoSchema, CreateApiKeyRequestSchema, CreatedApiKeySchema, UserSchema } from "./schemas/users";

const security = [{ bearer: [] }];

const me = createRoute({
  method: "get",
  path: "/users/me",
  tags: ["Users"],
  summary: "The caller",
  security,
  responses: { 200: jsonContent(UserSchema, "The authenticated user"), ...errorResponses() },
});

const listKeys = createRoute({
  method: "get",
  path: "/api-keys",
  tags: ["API keys"],
  summary: "The caller's API keys, newest first (never the secret part)",
  security,
  request: { query: PageQuerySchema },
  responses: { 200: jsonContent(pageSchema(ApiKeyInfoSchema, "ApiKeyInfoPage"), "A page of keys"), ...errorResponses() },
});

const createKey = createRoute({
  method: "post",
  path: "/api-keys",
  tags: ["API keys"],
  summary: "Create an API key for the caller; the key is in this answer only",
  security,
  request: { body: { content: { "application/json": { schema: CreateApiKeyRequestSchema } }, required: false } },
  responses: { 201: jsonContent(CreatedApiKeySchema, "The new key"), ...errorResponses(400, 409, 413, 415) },
});

const revokeKey = createRoute({
  method: "delete",
  path: "/api-keys/{key_id}",
  tags: ["API keys"],
  summary: "Revoke one of the caller's API keys; it fails from the next request on",
  security,
  request: { params: z.object({ key_id: z.string().min(1).max(64) }) },
  responses: { 200: jsonContent(SuccessSchema, "Revoked"), ...errorResponses(404) },
});

const providerParams = z.object({ provider: GitProviderSchema.openapi({ param: { name: "provider", in: "path" } }) });

const listTokens = createRoute({
  method: "get",
  path: "/users/me/provider-tokens",
  tags: ["Users"],
  summary: "Which git providers the caller has a token for (never the token)",
  security,
  responses: { 200: jsonContent(z.array(ProviderTokenInfoSchema), "The stored tokens' providers"), ...errorResponses() },
});

const putToken = createRoute({
  method: "put",
  path: "/users/me/provider-tokens/{provider}",
  tags: ["Users"],
  summary: "Store the caller's token for a git provider, encrypted at rest; used to clone repositories",
  security,
  request: {
    params: providerParams,
    body: { content: { "application/json": { schema: ProviderTokenRequestSchema } }, required: true },
  },
  responses: { 200: jsonContent(ProviderTokenInfoSchema, "Stored"), ...errorResponses(400, 413, 415) },
});

const deleteToken = createRoute({
  method: "delete",
  path: "/users/me/provider-tokens/{provider}",
  tags: ["Users"],
  summary: "Delete the caller's token for a git provider",
  security,
  request: { params: providerParams },
  responses: { 200: jsonContent(SuccessSchema, "Deleted"), ...errorResponses(404) },
});

const router = newRouter();
router.use("/users/*", requireUser());
router.use("/api-keys/*", requireUser());

export const usersRouter = router
  .openapi(me, async (c) => c.json(await getUser(c.env, c.var.userId), 200))
  .openapi(listTokens, async (c) => c.json(await listProviderTokens(c.env, c.var.userId), 200))
  .openapi(putToken, async (c) =>
    c.json(await putProviderToken(c.env, c.var.userId, c.req.valid("param").provider, c.req.valid("json").token), 200),
  )
  .openapi(deleteToken, async (c) => {
    await deleteProviderToken(c.env, c.var.userId, c.req.valid("param").provider);
    return c.json({ success: true as const }, 200);
  })
  .openapi(listKeys, async (c) => {
    const { limit, page_id } = c.req.valid("query");
    return c.json(await listApiKeys(c.env, c.var.userId, limit, page_id), 200);
  })
  .openapi(createKey, async (c) => {
    const { name } = CreateApiKeyRequestSchema.parse(c.req.valid("json") ?? {});
    return c.json(await createApiKey(c.env, c.var.userId, name), 201);
  })
  .openapi(revokeKey, async (c) => {
    await revokeApiKey(c.env, c.var.userId, c.req.valid("param").key_id);
    return c.json({ success: true as const }, 200);
  });
