import { createRoute, z } from "@hono/zod-openapi";
import type { StartTaskRecord } from "../conversation/types";
import type { ConversationFilter } from "../durable-objects/account-do";
import {
  countConversations,
  countStartTasks,
  deleteConversation,
  getConversation,
  getConversations,
  getStartTasks,
  pauseConversation,
  renameConversation,
  runConversation,
  searchConversations,
  searchStartTasks,
  sendMessage,
  startConversation,
  startConversationWatched,
  toStartTaskInfo,
} from "../services/conversation-service";
import { newRouter } from "./app-env";
import { requireUser } from "./middleware/auth";
import { batchIdsSchema, errorResponses, jsonContent, PageQuerySchema, pageSchema, SuccessSchema } from "./schemas/common";
import {
  AppConversationSchema,
  ConversationFilterSchema,
  ConversationIdSchema,
  ConversationSortSchema,
  SendMessageRequestSchema,
  StartRequestSchema,
  StartTaskFilterSchema,
  StartTaskSchema,
  StartTaskSortSchema,
  UpdateConversationRequestSchema,
} from "./schemas/conversations";
import { SANDBOX_STATUSES } from "./schemas/sandboxes";

const security = [{ bearer: [] }];
const tags = ["App conversations"];
const idParams = z.object({ conversation_id: ConversationIdSchema });
const startBody = { content: { "application/json": { schema: StartRequestSchema } }, required: false } as const;

const start = createRoute({
  method: "post",
  path: "/",
  tags,
  summary: "Start a conversation: answers the start task at once; the start goes on in the background",
  security,
  request: { body: startBody },
  responses: { 200: jsonContent(StartTaskSchema, "The start task, usually WORKING"), ...errorResponses(400, 404, 413, 415) },
});

const streamStart = createRoute({
  method: "post",
  path: "/stream-start",
  tags,
  summary: "Start a conversation and stream the start task's snapshots as a JSON array, until READY or ERROR",
  security,
  request: { body: startBody },
  responses: {
    200: jsonContent(z.array(StartTaskSchema), "A JSON array streamed one snapshot per status change"),
    ...errorResponses(400, 404, 413, 415),
  },
});

const list = createRoute({
  method: "get",
  path: "/",
  tags,
  summary: "Without `ids`: the caller's conversations as a page, newest first. With `ids`: batch get, null where unknown",
  security,
  request: {
    query: PageQuerySchema.extend({ ids: batchIdsSchema("Conversation ids (repeat the parameter), at most 100.").optional() }),
  },
  responses: {
    200: jsonContent(
      z.union([pageSchema(AppConversationSchema, "AppConversationPage"), z.array(AppConversationSchema.nullable())]),
      "A page, or the batch in request order",
    ),
    ...errorResponses(),
  },
});

const search = createRoute({
  method: "get",
  path: "/search",
  tags,
  summary: "Search the caller's conversations",
  security,
  request: { query: PageQuerySchema.extend(ConversationFilterSchema.shape).extend(ConversationSortSchema.shape) },
  responses: {
    200: jsonContent(pageSchema(AppConversationSchema, "AppConversationPage"), "A page of conversations"),
    ...errorResponses(),
  },
});

const count = createRoute({
  method: "get",
  path: "/count",
  tags,
  summary: "Count the caller's conversations (same filters as search)",
  security,
  request: { query: ConversationFilterSchema },
  responses: { 200: jsonContent(z.number().int(), "The count"), ...errorResponses() },
});

const taskSearch = createRoute({
  method: "get",
  path: "/start-tasks/search",
  tags,
  summary: "Search the caller's start tasks",
  security,
  request: { query: PageQuerySchema.extend(StartTaskFilterSchema.shape).extend(StartTaskSortSchema.shape) },
  responses: {
    200: jsonContent(pageSchema(StartTaskSchema, "AppConversationStartTaskPage"), "A page of start tasks"),
    ...errorResponses(),
  },
});

const taskCount = createRoute({
  method: "get",
  path: "/start-tasks/count",
  tags,
  summary: "Count the caller's start tasks (same filters as search)",
  security,
  request: { query: StartTaskFilterSchema },
  responses: { 200: jsonContent(z.number().int(), "The count"), ...errorResponses() },
});

const taskBatch = createRoute({
  method: "get",
  path: "/start-tasks",
  tags,
  summary: "Get start tasks by id, in request order, null where unknown or not the caller's",
  security,
  request: { query: z.object({ ids: batchIdsSchema("Start task ids (repeat the parameter), at most 100.") }) },
  responses: { 200: jsonContent(z.array(StartTaskSchema.nullable()), "The start tasks"), ...errorResponses() },
});

const getOne = createRoute({
  method: "get",
  path: "/{conversation_id}",
  tags,
  summary: "One conversation, with its sandbox's live status",
  security,
  request: { params: idParams },
  responses: { 200: jsonContent(AppConversationSchema, "The conversation"), ...errorResponses(404) },
});

const update = createRoute({
  method: "patch",
  path: "/{conversation_id}",
  tags,
  summary: "Rename a conversation",
  security,
  request: {
    params: idParams,
    body: { content: { "application/json": { schema: UpdateConversationRequestSchema } }, required: true },
  },
  responses: { 200: jsonContent(AppConversationSchema, "The conversation"), ...errorResponses(400, 404, 413, 415) },
});

const remove = createRoute({
  method: "delete",
  path: "/{conversation_id}",
  tags,
  summary: "Delete a conversation and its events, and its sandbox unless another conversation uses it",
  security,
  request: { params: idParams },
  responses: { 200: jsonContent(SuccessSchema, "Deleted"), ...errorResponses(404) },
});

const sendMessageRoute = createRoute({
  method: "post",
  path: "/{conversation_id}/send-message",
  tags,
  summary: "Add a user message; with `run` (default true) the agent works on it. 409 when the sandbox is not RUNNING",
  security,
  request: {
    params: idParams,
    body: { content: { "application/json": { schema: SendMessageRequestSchema } }, required: true },
  },
  responses: {
    200: jsonContent(
      z.object({ success: z.literal(true), sandbox_status: z.enum(SANDBOX_STATUSES) }).openapi("SendMessageResponse"),
      "Added",
    ),
    ...errorResponses(400, 404, 409, 413, 415),
  },
});

const pauseRoute = createRoute({
  method: "post",
  path: "/{conversation_id}/pause",
  tags,
  summary: "Pause the agent: it stops after the step it is in",
  security,
  request: { params: idParams },
  responses: { 200: jsonContent(SuccessSchema, "Pausing"), ...errorResponses(404) },
});

const runRoute = createRoute({
  method: "post",
  path: "/{conversation_id}/run",
  tags,
  summary: "Run the agent (continue after a pause or a finished turn); 409 if it is running or the sandbox is not",
  security,
  request: { params: idParams },
  responses: { 200: jsonContent(SuccessSchema, "Running"), ...errorResponses(404, 409) },
});

function filterOf(query: z.infer<typeof ConversationFilterSchema>): ConversationFilter {
  return {
    title_contains: query.title__contains,
    created_at_gte: query.created_at__gte,
    created_at_lt: query.created_at__lt,
    updated_at_gte: query.updated_at__gte,
    updated_at_lt: query.updated_at__lt,
    sandbox_id: query.sandbox_id__eq,
  };
}

/** Turns the object's NDJSON snapshots into the answer: one JSON array, written as it grows. */
function snapshotsAsJsonArray(ndjson: ReadableStream<Uint8Array>, origin: string): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let buffered = "";
  let first = true;
  const emit = (line: string, controller: TransformStreamDefaultController<Uint8Array>) => {
    if (line.trim() === "") return;
    const task = JSON.parse(line) as StartTaskRecord;
    controller.enqueue(encoder.encode(`${first ? "[" : ","}${JSON.stringify(toStartTaskInfo(task, origin))}`));
    first = false;
  };
  return ndjson.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        buffered += decoder.decode(chunk, { stream: true });
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) emit(line, controller);
      },
      flush(controller) {
        emit(buffered, controller);
        controller.enqueue(encoder.encode(first ? "[]" : "]"));
      },
    }),
  );
}

const router = newRouter();
router.use("*", requireUser());

const origin = (url: string) => new URL(url).origin;

export const appConversationsRouter = router
  .openapi(start, async (c) => {
    const request = StartRequestSchema.parse(c.req.valid("json") ?? {});
    const task = await startConversation(c.env, c.var.config, c.var.userId, request);
    return c.json(toStartTaskInfo(task, origin(c.req.url)), 200);
  })
  .openapi(streamStart, async (c) => {
    const request = StartRequestSchema.parse(c.req.valid("json") ?? {});
    const snapshots = await startConversationWatched(c.env, c.var.config, c.var.userId, request);
    return new Response(snapshotsAsJsonArray(snapshots, origin(c.req.url)), {
      status: 200,
      headers: { "Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" },
    }) as never;
  })
  .openapi(list, async (c) => {
    const { ids, limit, page_id } = c.req.valid("query");
    if (ids !== undefined) return c.json(await getConversations(c.env, c.var.userId, ids, origin(c.req.url)), 200);
    return c.json(await searchConversations(c.env, c.var.userId, {}, "CREATED_AT_DESC", limit, page_id, origin(c.req.url)), 200);
  })
  .openapi(search, async (c) => {
    const query = c.req.valid("query");
    const page = await searchConversations(
      c.env,
      c.var.userId,
      filterOf(query),
      query.sort_order,
      query.limit,
      query.page_id,
      origin(c.req.url),
    );
    return c.json(page, 200);
  })
  .openapi(count, async (c) => c.json(await countConversations(c.env, c.var.userId, filterOf(c.req.valid("query"))), 200))
  .openapi(taskSearch, async (c) => {
    const query = c.req.valid("query");
    const page = await searchStartTasks(
      c.env,
      c.var.userId,
      query.conversation_id__eq,
      query.created_at__gte,
      query.sort_order === "CREATED_AT_DESC",
      query.limit,
      query.page_id,
      origin(c.req.url),
    );
    return c.json(page, 200);
  })
  .openapi(taskCount, async (c) => {
    const query = c.req.valid("query");
    return c.json(await countStartTasks(c.env, c.var.userId, query.conversation_id__eq, query.created_at__gte), 200);
  })
  .openapi(taskBatch, async (c) =>
    c.json(await getStartTasks(c.env, c.var.userId, c.req.valid("query").ids, origin(c.req.url)), 200),
  )
  .openapi(getOne, async (c) =>
    c.json(await getConversation(c.env, c.var.userId, c.req.valid("param").conversation_id, origin(c.req.url)), 200),
  )
  .openapi(update, async (c) => {
    const { title } = c.req.valid("json");
    return c.json(
      await renameConversation(c.env, c.var.userId, c.req.valid("param").conversation_id, title, origin(c.req.url)),
      200,
    );
  })
  .openapi(sendMessageRoute, async (c) => {
    const message = c.req.valid("json");
    const id = c.req.valid("param").conversation_id;
    const result = await sendMessage(c.env, c.var.userId, id, { role: "user", content: message.content }, message.run ?? true);
    return c.json(result, 200);
  })
  .openapi(pauseRoute, async (c) => {
    await pauseConversation(c.env, c.var.userId, c.req.valid("param").conversation_id);
    return c.json({ success: true as const }, 200);
  })
  .openapi(runRoute, async (c) => {
    await runConversation(c.env, c.var.userId, c.req.valid("param").conversation_id);
    return c.json({ success: true as const }, 200);
  })
  .openapi(remove, async (c) => {
    await deleteConversation(c.env, c.var.userId, c.req.valid("param").conversation_id);
    return c.json({ success: true as const }, 200);
  });
