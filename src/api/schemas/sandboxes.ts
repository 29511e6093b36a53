import { z } from "@hono/zod-openapi";

export const SANDBOX_STATUSES = ["STARTING", "RUNNING", "PAUSED", "ERROR", "MISSING"] as const;
export const SandboxStatusSchema = z.enum(SANDBOX_STATUSES).openapi("SandboxStatus");

/** A sandbox id as a value (in a body or query); `SandboxIdSchema` is the path parameter. */
export const SandboxIdString = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "sandbox ids are 1 to 64 URL-safe characters");

export const SandboxIdSchema = SandboxIdString.openapi({
  param: { name: "sandbox_id", in: "path" },
  example: "3f1c0e9a2b7d4c5e8f9a0b1c2d3e4f5a",
});

export const ExposedUrlSchema = z.object({
  name: z.enum(["AGENT_SERVER", "WORKER_1", "WORKER_2"]),
  url: z.string(),
  port: z.number().int(),
});

export const SandboxInfoSchema = z
  .object({
    id: z.string(),
    created_by_user_id: z.string(),
    sandbox_spec_id: z.string(),
    status: SandboxStatusSchema,
    session_api_key: z.string().nullable().openapi({ description: "Only while RUNNING." }),
    exposed_urls: z.array(ExposedUrlSchema).nullable().openapi({ description: "Only while RUNNING." }),
    created_at: z.string(),
    updated_at: z.string(),
    status_detail: z.string().nullable().openapi({ description: "Why the sandbox is in ERROR (or was paused)." }),
    last_activity_at: z.string(),
  })
  .openapi("SandboxInfo");

export const StatusFilterSchema = z.object({ status__eq: SandboxStatusSchema.optional() });

export const StartSandboxRequestSchema = z
  .object({ sandbox_spec_id: z.string().min(1).max(64).optional() })
  .openapi("StartSandboxRequest");
