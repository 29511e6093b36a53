import { z } from "@hono/zod-openapi";

export const UserSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    email: z.string().nullable(),
    created_at: z.string(),
  })
  .openapi("User");

export const ApiKeyInfoSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string().openapi({ description: "The key's first characters, to recognise it. Never the secret part." }),
    created_at: z.string(),
  })
  .openapi("ApiKeyInfo");

export const CreatedApiKeySchema = ApiKeyInfoSchema.extend({
  key: z.string().openapi({ description: "The whole key. Shown once, never stored: keep it now." }),
}).openapi("CreatedApiKey");

export const CreateApiKeyRequestSchema = z
  .object({ name: z.string().trim().min(1).max(100).default("default") })
  .openapi("CreateApiKeyRequest");

export const CreateUserRequestSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    email: z.email().max(320).nullable().default(null),
    api_key_name: z.string().trim().min(1).max(100).default("default"),
  })
  .openapi("CreateUserRequest");

export const CreatedUserSchema = z.object({ user: UserSchema, api_key: CreatedApiKeySchema }).openapi("CreatedUser");
