import { z } from "@hono/zod-openapi";
import { EXECUTION_STATUSES, START_TASK_STATUSES } from "../../conversation/types";
import { GIT_PROVIDERS } from "../../services/provider-token-service";
import { IsoInstantSchema } from "./common";
import { SANDBOX_STATUSES, SandboxIdString } from "./sandboxes";

/** A conversation or start-task id: 32 hex characters, or a dashed UUID (normalized away). */
const HEX_ID = /^[0-9a-fA-F]{32}$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export function normalizeId(id: string): string | null {
  return HEX_ID.test(id) ? id.replaceAll("-", "").toLowerCase() : null;
}

const ConversationIdString = z.string().regex(HEX_ID, "conversation ids are 32 hex characters or a UUID");

export const ConversationIdSchema = ConversationIdString.openapi({
  param: { name: "conversation_id", in: "path" },
  example: "9a3c5e7f1b2d4f6a8c0e2a4b6d8f0a1c",
});

/** `owner/repo`: letters, digits, `.`, `_` and `-`, not starting with a dot or a dash. */
export const RepositorySchema = z
  .string()
  .max(200)
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]*\/[A-Za-z0-9_][A-Za-z0-9_.-]*$/, "a repository is 'owner/repo'")
  .refine((value) => !value.split("/").some((part) => part.endsWith(".") || part.includes("..")), "a repository is 'owner/repo'");

/** A git branch name that cannot be taken for an option or escape the refs namespace. */
export const BranchSchema = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_./-]*$/, "not a valid branch name")
  .refine((value) => !value.includes("..") && !value.endsWith("/") && !value.endsWith(".lock") && !value.includes("//"), {
    message: "not a valid branch name",
  });

export const GitProviderSchema = z.enum(GIT_PROVIDERS).openapi("GitProvider");

const nonBlank = (max: number) =>
  z
    .string()
    .max(max)
    .refine((value) => value.trim().length > 0, "must not be empty");

export const MessageContentSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text"), text: nonBlank(200_000) }),
  z.object({ type: z.literal("image"), image_urls: z.array(z.url().max(10_000)).min(1).max(20) }),
]);

export const SendMessageRequestSchema = z
  .object({
    role: z.literal("user").default("user"),
    content: z.array(MessageContentSchema).min(1, "a message needs content").max(50),
    run: z.boolean().optional(),
  })
  .openapi("SendMessageRequest");

/**
 * A client message on the event socket: a user message, its content as text or as the content
 * list of `send-message`; it runs the agent unless `run` is false.
 */
export const SocketMessageSchema = z.object({
  role: z.literal("user"),
  content: z.union([
    nonBlank(200_000).transform((text) => [{ type: "text" as const, text }]),
    z.array(MessageContentSchema).min(1, "a message needs content").max(50),
  ]),
  run: z.boolean().optional(),
});

export const StartRequestSchema = z
  .object({
    sandbox_id: SandboxIdString.nullish(),
    initial_message: SendMessageRequestSchema.nullish(),
    llm_model: z.string().min(1).max(200).nullish(),
    selected_repository: RepositorySchema.nullish(),
    selected_branch: BranchSchema.nullish(),
    git_provider: GitProviderSchema.nullish(),
    title: nonBlank(500).nullish(),
    trigger: z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,31}$/, "a trigger is a lower-case word such as 'gui' or 'resolver'")
      .nullish(),
    pr_number: z.array(z.number().int().positive()).max(100).nullish(),
    agent_type: z.enum(["default", "plan"]).nullish(),
    parent_conversation_id: ConversationIdString.nullish(),
  })
  .openapi("AppConversationStartRequest");

export type StartRequest = z.infer<typeof StartRequestSchema>;

export const StartTaskSchema = z
  .object({
    id: z.string(),
    created_by_user_id: z.string(),
    status: z.enum(START_TASK_STATUSES),
    detail: z.string().nullable(),
    app_conversation_id: z.string().nullable(),
    sandbox_id: z.string().nullable(),
    agent_server_url: z.string().nullable(),
    request: z.record(z.string(), z.unknown()),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi("AppConversationStartTask");

export const MetricsSchema = z
  .object({
    accumulated_cost: z.number(),
    max_budget_per_task: z.number().nullable(),
    accumulated_token_usage: z.object({
      prompt_tokens: z.number().int(),
      completion_tokens: z.number().int(),
      cache_read_tokens: z.number().int(),
      cache_write_tokens: z.number().int(),
      reasoning_tokens: z.number().int(),
    }),
  })
  .openapi("Metrics");

export const AppConversationSchema = z
  .object({
    id: z.string(),
    created_by_user_id: z.string(),
    sandbox_id: z.string(),
    selected_repository: z.string().nullable(),
    selected_branch: z.string().nullable(),
    git_provider: GitProviderSchema.nullable(),
    title: z.string(),
    trigger: z.string().nullable(),
    pr_number: z.array(z.number().int()),
    llm_model: z.string().nullable(),
    agent_type: z.enum(["default", "plan"]),
    metrics: MetricsSchema,
    parent_conversation_id: z.string().nullable(),
    sub_conversation_ids: z.array(z.string()),
    created_at: z.string(),
    updated_at: z.string(),
    sandbox_status: z.enum(SANDBOX_STATUSES),
    execution_status: z.enum(EXECUTION_STATUSES),
    conversation_url: z.string(),
    session_api_key: z.string().nullable().openapi({ description: "The sandbox's key, only while it is RUNNING." }),
  })
  .openapi("AppConversation");

export const CONVERSATION_SORT_ORDERS = [
  "CREATED_AT",
  "CREATED_AT_DESC",
  "UPDATED_AT",
  "UPDATED_AT_DESC",
  "TITLE",
  "TITLE_DESC",
] as const;
export type ConversationSortOrder = (typeof CONVERSATION_SORT_ORDERS)[number];

export const ConversationFilterSchema = z.object({
  title__contains: z.string().min(1).max(500).optional(),
  created_at__gte: IsoInstantSchema.optional(),
  created_at__lt: IsoInstantSchema.optional(),
  updated_at__gte: IsoInstantSchema.optional(),
  updated_at__lt: IsoInstantSchema.optional(),
  sandbox_id__eq: z.string().min(1).max(64).optional(),
});

export const ConversationSortSchema = z.object({
  sort_order: z.enum(CONVERSATION_SORT_ORDERS).default("CREATED_AT_DESC"),
});

export const StartTaskFilterSchema = z.object({
  conversation_id__eq: ConversationIdString.optional(),
  created_at__gte: IsoInstantSchema.optional(),
});

export const StartTaskSortSchema = z.object({
  sort_order: z.enum(["CREATED_AT", "CREATED_AT_DESC"]).default("CREATED_AT_DESC"),
});

export const UpdateConversationRequestSchema = z.object({ title: nonBlank(500) }).openapi("AppConversationUpdateRequest");

export const ProviderTokenRequestSchema = z
  .object({
    token: z
      .string()
      .min(1)
      .max(4096)
      .regex(/^[\x21-\x7e]+$/, "a token is printable ASCII without spaces"),
  })
  .openapi("ProviderTokenRequest");

export const ProviderTokenInfoSchema = z
  .object({ provider: GitProviderSchema, created_at: z.string(), updated_at: z.string() })
  .openapi("ProviderTokenInfo");
