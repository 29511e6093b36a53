import { normalizeId } from "../api/schemas/conversations";
import { type EventCursor, type EventQuery, type EventSortOrder, parseEventId } from "../conversation/event-log";
import type { ConversationEvent } from "../conversation/types";
import { conversationOf } from "./conversation-service";
import { decodeCursor, encodeCursor, type Page } from "./paging";
import { accountOf } from "./user-service";

export interface EventFilter extends EventQuery {
  conversation_id?: string | undefined;
}

/** The conversations a search spans: one (when owned), or all of the caller's. */
async function conversationsFor(env: Env, userId: string, conversationId: string | undefined): Promise<string[]> {
  const account = accountOf(env, userId);
  if (conversationId === undefined) return account.conversationIds();
  const normalized = normalizeId(conversationId);
  if (normalized === null) return [];
  return (await account.conversationRows([normalized])).map((row) => row.id);
}

function conversationIdOf(event: ConversationEvent): string {
  return event.id.slice(0, 32);
}

function seqOf(event: ConversationEvent): number {
  return parseEventId(event.id)?.seq ?? 0;
}

function compare(a: ConversationEvent, b: ConversationEvent): number {
  if (a.timestamp !== b.timestamp) return a.timestamp < b.timestamp ? -1 : 1;
  const [ca, cb] = [conversationIdOf(a), conversationIdOf(b)];
  if (ca !== cb) return ca < cb ? -1 : 1;
  return seqOf(a) - seqOf(b);
}

/**
 * Events across the caller's conversations in (timestamp, conversation, sequence) order. Each
 * conversation answers at most limit + 1 rows after the cursor and the pages are merged, so a
 * page costs O(conversations × limit); with `conversation_id__eq` it is one object's O(limit).
 */
export async function searchEvents(
  env: Env,
  userId: string,
  filter: EventFilter,
  order: EventSortOrder,
  limit: number,
  pageId: string | undefined,
): Promise<Page<ConversationEvent>> {
  const after = pageId === undefined ? null : (decodeCursor(pageId, ["string", "string", "number"]) as EventCursor);
  const ids = await conversationsFor(env, userId, filter.conversation_id);
  const query: EventQuery = { kind: filter.kind, timestamp_gte: filter.timestamp_gte, timestamp_lt: filter.timestamp_lt };
  const pages = await Promise.all(ids.map((id) => conversationOf(env, id).searchEvents(query, order, limit + 1, after)));
  const merged = pages
    .flatMap((page) => JSON.parse(page) as ConversationEvent[])
    .sort(order === "TIMESTAMP_DESC" ? (a, b) => compare(b, a) : compare);
  const items = merged.slice(0, limit);
  const last = items.at(-1);
  return {
    items,
    next_page_id: merged.length > limit && last ? encodeCursor([last.timestamp, conversationIdOf(last), seqOf(last)]) : null,
  };
}

export async function countEvents(env: Env, userId: string, filter: EventFilter): Promise<number> {
  const ids = await conversationsFor(env, userId, filter.conversation_id);
  const query: EventQuery = { kind: filter.kind, timestamp_gte: filter.timestamp_gte, timestamp_lt: filter.timestamp_lt };
  const counts = await Promise.all(ids.map((id) => conversationOf(env, id).countEvents(query)));
  return counts.reduce((sum, n) => sum + n, 0);
}

/** In request order; null for ids that are malformed, unknown or in another user's conversation. */
export async function getEvents(env: Env, userId: string, ids: string[]): Promise<(ConversationEvent | null)[]> {
  const parsed = ids.map(parseEventId);
  const wanted = [...new Set(parsed.flatMap((p) => (p === null ? [] : [p.conversationId])))];
  const owned = new Set((await accountOf(env, userId).conversationRows(wanted)).map((row) => row.id));
  const byConversation = new Map<string, number[]>();
  for (const p of parsed)
    if (p !== null && owned.has(p.conversationId))
      byConversation.set(p.conversationId, [...(byConversation.get(p.conversationId) ?? []), p.seq]);
  const found = new Map<string, ConversationEvent>();
  await Promise.all(
    [...byConversation].map(async ([conversationId, seqs]) => {
      const events = JSON.parse(await conversationOf(env, conversationId).getEvents([...new Set(seqs)])) as ConversationEvent[];
      for (const event of events) found.set(event.id, event);
    }),
  );
  return ids.map((id) => found.get(id) ?? null);
}
