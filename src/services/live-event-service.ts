import { refusedSocket, SOCKET_CLOSE } from "../conversation/live-streams";
import { ApiError, validationError } from "../errors";
import { conversationOf, requireOwnedConversation } from "./conversation-service";
import { PROXY_USER_HEADER } from "./proxy-headers";

/**
 * A position in a conversation's event log as a client names it: a sequence number (the SSE
 * `id:`), or an event id `<conversation id>-<sequence>` of this conversation. Null when it is
 * neither.
 */
export function parseEventPosition(raw: string, conversationId: string): number | null {
  const value = raw.trim();
  const match = /^(?:([0-9a-f]{32})-)?(0|[1-9][0-9]{0,14})$/.exec(value);
  if (match === null) return null;
  if (match[1] !== undefined && match[1] !== conversationId.replace(/-/g, "").toLowerCase()) return null;
  return Number(match[2]);
}

/** Server-Sent Events of a conversation's events after `after`, then live. */
export async function openEventStream(env: Env, userId: string, id: string, after: number): Promise<ReadableStream<Uint8Array>> {
  const record = await requireOwnedConversation(env, userId, id);
  const opened = await conversationOf(env, record.id).openEventStream(userId, after);
  if ("error" in opened) {
    const { code, detail } = opened.error;
    if (code === "VALIDATION_ERROR") throw validationError(["header", "Last-Event-ID"], String(detail));
    throw new ApiError(code, detail);
  }
  return opened.stream;
}

/** Hands an authenticated socket upgrade to the conversation's object. */
export async function openEventSocket(env: Env, userId: string, id: string, after: number | null): Promise<Response> {
  let conversationId: string;
  try {
    conversationId = (await requireOwnedConversation(env, userId, id)).id;
  } catch (error) {
    if (error instanceof ApiError) return refusedSocket(SOCKET_CLOSE.NOT_FOUND, error.toBody());
    throw error;
  }
  const url = new URL("https://conversation/events/socket");
  if (after !== null) url.searchParams.set("after", String(after));
  const response = await conversationOf(env, conversationId).fetch(url, {
    headers: { Upgrade: "websocket", [PROXY_USER_HEADER]: userId },
  });
  // A fresh answer: the object's is immutable, and the middleware adds headers on the way out.
  return new Response(null, { status: response.status, webSocket: response.webSocket });
}
