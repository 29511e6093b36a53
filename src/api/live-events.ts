import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { refusedSocket, SOCKET_CLOSE } from "../conversation/live-streams";
import { ApiError, validationError } from "../errors";
import { openEventSocket, openEventStream, parseEventPosition } from "../services/live-event-service";
import { type AppEnv, newRouter } from "./app-env";
import { authenticate, requireUser } from "./middleware/auth";
import { errorResponses } from "./schemas/common";
import { ConversationIdSchema, normalizeId } from "./schemas/conversations";

const tags = ["Events"];
const security = [{ bearer: [] }];

const sessionKeyQuery = z.string().max(200).optional().openapi({
  description: "The API key, for clients that cannot set headers (EventSource, WebSocket in a browser).",
});

const stream = createRoute({
  method: "get",
  path: "/{conversation_id}/events/stream",
  tags,
  summary: "The conversation's events as Server-Sent Events: the history after Last-Event-ID (all without one), then live",
  description:
    "One event per message: `id:` is the event's sequence number, `data:` its JSON. A reconnect with `Last-Event-ID` (the header, which EventSource sends, or the `last_event_id` query parameter; the header wins) resumes exactly after it. An idle stream gets a `: heartbeat` comment. A client that falls more than the configured buffer behind is cut off and resumes from its last id.",
  security,
  request: {
    params: z.object({ conversation_id: ConversationIdSchema }),
    query: z.object({
      last_event_id: z
        .string()
        .max(100)
        .optional()
        .openapi({ description: "A sequence number, or an event id of this conversation" }),
      session_api_key: sessionKeyQuery,
    }),
  },
  responses: {
    200: { description: "An endless `text/event-stream`", content: { "text/event-stream": { schema: z.string() } } },
    ...errorResponses(404),
  },
});

const SOCKET_PATH = "/{conversation_id}/events/socket";

function positionFrom(raw: string | undefined, conversationId: string, loc: (string | number)[]): number {
  if (raw === undefined) return 0;
  const after = parseEventPosition(raw, conversationId);
  if (after === null) throw validationError(loc, "must be an event sequence number or an event id of this conversation");
  return after;
}

async function socket(c: Context<AppEnv>): Promise<Response> {
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket") {
    throw new ApiError("UPGRADE_REQUIRED", "This is a WebSocket endpoint: connect with a WebSocket client.", {
      Upgrade: "websocket",
    });
  }
  let userId: string;
  try {
    userId = await authenticate(c, { queryKey: true });
  } catch (error) {
    if (error instanceof ApiError) return refusedSocket(SOCKET_CLOSE.BAD_CREDENTIALS, error.toBody());
    throw error;
  }
  const id = normalizeId(c.req.param("conversation_id") ?? "");
  if (id === null)
    return refusedSocket(SOCKET_CLOSE.NOT_FOUND, { code: "CONVERSATION_NOT_FOUND", detail: "No conversation with this id." });
  const resendAll = c.req.query("resend_all");
  const afterRaw = c.req.query("after");
  try {
    if (resendAll !== undefined && resendAll !== "true" && resendAll !== "false") {
      throw validationError(["query", "resend_all"], "must be true or false");
    }
    const after = afterRaw !== undefined ? positionFrom(afterRaw, id, ["query", "after"]) : resendAll === "true" ? 0 : null;
    return await openEventSocket(c.env, userId, id, after);
  } catch (error) {
    if (error instanceof ApiError && error.code === "VALIDATION_ERROR") {
      return refusedSocket(SOCKET_CLOSE.INVALID_REQUEST, error.toBody());
    }
    throw error;
  }
}

/**
 * The live event routes. They authenticate themselves (the key may come as a query parameter)
 * and are mounted before the other conversation routes, whose middleware they never reach.
 */
const router = newRouter();
router.use("/:conversation_id/events/stream", requireUser({ queryKey: true }));

export const liveEventsRouter = router
  .openapi(stream, async (c) => {
    const id = c.req.valid("param").conversation_id;
    const header = c.req.header("Last-Event-ID");
    const after =
      header !== undefined
        ? positionFrom(header, id, ["header", "Last-Event-ID"])
        : positionFrom(c.req.valid("query").last_event_id, id, ["query", "last_event_id"]);
    const body = await openEventStream(c.env, c.var.userId, id, after);
    return new Response(body, {
      status: 200,
      headers: {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache, no-store",
        "X-Accel-Buffering": "no",
        "X-Content-Type-Options": "nosniff",
      },
    }) as never;
  })
  .get(SOCKET_PATH.replace("{conversation_id}", ":conversation_id"), socket);

router.openAPIRegistry.registerPath({
  method: "get",
  path: SOCKET_PATH,
  tags,
  summary: "The conversation's events over a WebSocket: full state, then (with resend_all or after) the history, then live",
  description: [
    'On connect: a `ConversationStateUpdateEvent` with `key: "full_state"`; with `resend_all=true` every stored event, with `after=<seq or event id>` those after it; then each new event as one JSON text frame.',
    'A text frame `{"role": "user", "content": "..."}` (content as text or as send-message\'s content list; `run` defaults to true) is a user message on the same path as send-message. A frame the server cannot take gets an error frame `{"code", "detail"}` (the API\'s error body); the socket stays open.',
    `Close codes: ${SOCKET_CLOSE.BAD_CREDENTIALS} bad or missing credentials, ${SOCKET_CLOSE.NOT_FOUND} unknown conversation (or deleted), ${SOCKET_CLOSE.INVALID_REQUEST} invalid query parameters, ${SOCKET_CLOSE.TOO_SLOW} the client fell too far behind (reconnect with after). Each close follows an error frame saying why.`,
    "A text frame `ping` is answered `pong` without waking the conversation.",
  ].join("\n\n"),
  security: [{ bearer: [] }],
  request: {
    params: z.object({ conversation_id: ConversationIdSchema }),
    query: z.object({
      resend_all: z.enum(["true", "false"]).optional(),
      after: z.string().max(100).optional().openapi({ description: "A sequence number, or an event id of this conversation" }),
      session_api_key: sessionKeyQuery,
    }),
  },
  responses: {
    101: { description: "Switching protocols: the socket" },
    426: { description: "Not a WebSocket upgrade" },
  },
});
