import { createRoute, z } from "@hono/zod-openapi";
import { countEvents, type EventFilter, getEvents, searchEvents } from "../services/event-service";
import { newRouter } from "./app-env";
import { requireUser } from "./middleware/auth";
import { batchIdsSchema, errorResponses, IsoInstantSchema, jsonContent, PageQuerySchema, pageSchema } from "./schemas/common";

const security = [{ bearer: [] }];
const tags = ["Events"];

const EventSchema = z
  .object({
    id: z.string().openapi({ description: "`<conversation id>-<sequence>`" }),
    timestamp: z.string(),
    source: z.enum(["agent", "user", "environment"]),
    kind: z.string().openapi({
      example: "ActionEvent",
      description:
        "MessageEvent, ActionEvent, ObservationEvent, AgentErrorEvent, ConversationStateUpdateEvent, ConversationErrorEvent, PauseEvent, SystemPromptEvent; plus that kind's fields",
    }),
  })
  .catchall(z.unknown())
  .openapi("Event");

const EventFilterSchema = z.object({
  conversation_id__eq: z.string().min(1).max(64).optional(),
  kind__eq: z.string().min(1).max(64).optional(),
  timestamp__gte: IsoInstantSchema.optional(),
  timestamp__lt: IsoInstantSchema.optional(),
});

const search = createRoute({
  method: "get",
  path: "/search",
  tags,
  summary: "Search events across the caller's conversations, by timestamp",
  security,
  request: {
    query: PageQuerySchema.extend(EventFilterSchema.shape).extend({
      sort_order: z.enum(["TIMESTAMP", "TIMESTAMP_DESC"]).default("TIMESTAMP"),
    }),
  },
  responses: { 200: jsonContent(pageSchema(EventSchema, "EventPage"), "A page of events"), ...errorResponses() },
});

const count = createRoute({
  method: "get",
  path: "/count",
  tags,
  summary: "Count events (same filters as search)",
  security,
  request: { query: EventFilterSchema },
  responses: { 200: jsonContent(z.number().int(), "The count"), ...errorResponses() },
});

const batchGet = createRoute({
  method: "get",
  path: "/",
  tags,
  summary: "Get events by id, in request order, null where unknown or not the caller's",
  security,
  request: { query: z.object({ id: batchIdsSchema("Event ids (repeat the parameter), at most 100.") }) },
  responses: { 200: jsonContent(z.array(EventSchema.nullable()), "The events"), ...errorResponses() },
});

function filterOf(query: z.infer<typeof EventFilterSchema>): EventFilter {
  return {
    conversation_id: query.conversation_id__eq,
    kind: query.kind__eq,
    timestamp_gte: query.timestamp__gte,
    timestamp_lt: query.timestamp__lt,
  };
}

const router = newRouter();
router.use("*", requireUser());

export const eventsRouter = router
  .openapi(search, async (c) => {
    const query = c.req.valid("query");
    return c.json(await searchEvents(c.env, c.var.userId, filterOf(query), query.sort_order, query.limit, query.page_id), 200);
  })
  .openapi(count, async (c) => c.json(await countEvents(c.env, c.var.userId, filterOf(c.req.valid("query"))), 200))
  .openapi(batchGet, async (c) => c.json(await getEvents(c.env, c.var.userId, c.req.valid("query").id), 200));
