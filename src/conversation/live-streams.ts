import type { ErrorBody } from "../errors";
import { eventsAfter, lastEventSeq, type StoredEvent } from "./event-log";
import type { ConversationEvent } from "./types";

/** Close codes of the event socket. */
export const SOCKET_CLOSE = {
  BAD_CREDENTIALS: 4001,
  NOT_FOUND: 4004,
  /** The client fell further behind than its buffer allows; it reconnects with `after`. */
  TOO_SLOW: 4008,
  INVALID_REQUEST: 4022,
} as const;

/** How many stored events one catch-up write carries. */
const CATCH_UP_PAGE = 500;

interface SseClient {
  writer: WritableStreamDefaultWriter<Uint8Array>;
  /** The sequence number of the last event written to this client. */
  sent: number;
  /** False while it catches up from the table; live events skip it until it is level. */
  live: boolean;
  /** Bytes written but not yet taken by the reader. */
  unread: number;
}

export interface LiveStreamOptions {
  heartbeatMs: number;
  clientBufferBytes: number;
}

const encoder = new TextEncoder();

function sseFrames(rows: StoredEvent[]): string {
  let text = "";
  for (const row of rows) text += `id: ${row.seq}\ndata: ${row.event_json}\n\n`;
  return text;
}

/** A frame that is not an event: the API's error body. */
export function errorFrame(body: ErrorBody): string {
  return JSON.stringify(body);
}

/**
 * A socket that only says why it cannot be served: an error frame, then a close with `code`.
 * Browsers see neither the status nor the body of a refused upgrade.
 */
export function refusedSocket(code: number, body: ErrorBody): Response {
  const { 0: client, 1: server } = new WebSocketPair();
  server.accept();
  server.send(errorFrame(body));
  server.close(code, body.code);
  return new Response(null, { status: 101, webSocket: client });
}

/**
 * The live readers of one conversation's event log: hibernatable WebSockets (held by the
 * runtime, so an idle object can leave memory) and Server-Sent Events streams (held here).
 *
 * Every append queues one flush for the end of the current turn; the flush reads the rows after
 * the last one broadcast, so a rolled-back append is never sent and the table is the only
 * source of truth. Each client has a position (its last sequence number): history written on
 * connect and live rows never overlap, and a reconnect with its last id resumes exactly after it.
 *
 * A client that stops reading never slows the agent or the others: live writes are not awaited,
 * and one that has more than `clientBufferBytes` unread is cut off (SSE: nothing more is written and
 * the stream ends after what it holds; WebSocket: close code 4008). It reconnects from its last id
 * and catches up from the table, paced by its own reading.
 */
export class LiveStreams {
  /** The last sequence number handed to live clients. */
  private broadcast: number;
  private flushQueued = false;
  private readonly sse = new Set<SseClient>();
  /** Sockets that joined in this turn, with the position their history reached. */
  private readonly joined = new Map<WebSocket, number>();
  private heartbeat: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly ctx: DurableObjectState,
    private readonly options: LiveStreamOptions,
  ) {
    this.broadcast = lastEventSeq(ctx.storage.sql);
  }

  get lastSeq(): number {
    return lastEventSeq(this.ctx.storage.sql);
  }

  /** The event log calls this after each append. */
  appended(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    queueMicrotask(() => this.flush());
  }

  private flush(): void {
    this.flushQueued = false;
    const rows = eventsAfter(this.ctx.storage.sql, this.broadcast, Number.MAX_SAFE_INTEGER);
    const last = rows.at(-1);
    if (last === undefined) return;
    this.broadcast = last.seq;
    for (const socket of this.ctx.getWebSockets()) {
      const from = this.joined.get(socket) ?? 0;
      for (const row of rows) if (row.seq > from) this.sendToSocket(socket, row.event_json);
    }
    this.joined.clear();
    for (const client of this.sse) if (client.live) this.writeLive(client, rows);
  }

  // ---- WebSocket -----------------------------------------------------------------------------

  /**
   * Accepts a socket: the full state first, then the history after `after` (none when null),
   * then, from the next flush on, each new event. All of it is sent in this turn, so no live
   * event can fall between the history and the first live row.
   */
  acceptSocket(server: WebSocket, attachment: unknown, state: ConversationEvent, after: number | null): void {
    this.ctx.acceptWebSocket(server);
    server.serializeAttachment(attachment);
    server.send(JSON.stringify(state));
    for (let position = after; position !== null; ) {
      const rows = eventsAfter(this.ctx.storage.sql, position, CATCH_UP_PAGE);
      for (const row of rows) server.send(row.event_json);
      position = rows.length < CATCH_UP_PAGE ? null : (rows.at(-1)?.seq ?? null);
    }
    // Everything up to here was either just sent or is older than the client asked for.
    this.joined.set(server, this.lastSeq);
  }

  private sendToSocket(socket: WebSocket, text: string): void {
    try {
      // `bufferedAmount` is what the runtime holds for a reader that does not keep up. The workerd
      // in use does not report it yet (cloudflare/workerd#988): until it does, the runtime's send
      // queue holds a stalled reader's backlog, outside this object's memory.
      const buffered = (socket as { bufferedAmount?: unknown }).bufferedAmount;
      if (typeof buffered === "number" && buffered > this.options.clientBufferBytes) {
        socket.close(SOCKET_CLOSE.TOO_SLOW, "Too far behind; reconnect with after=<last sequence number>.");
        return;
      }
      socket.send(text);
    } catch {
      // A socket closing under us: it reconnects from its last id.
    }
  }

  // ---- Server-Sent Events ----------------------------------------------------------------------

  /** A stream of the events after `after`: the history first (as fast as the reader takes it), then live. */
  openSse(after: number): ReadableStream<Uint8Array> {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const client: SseClient = { writer: writable.getWriter(), sent: after, live: false, unread: 0 };
    this.sse.add(client);
    this.ensureHeartbeat();
    this.ctx.waitUntil(this.catchUp(client));
    return readable;
  }

  private async catchUp(client: SseClient): Promise<void> {
    try {
      await client.writer.write(encoder.encode("retry: 1000\n\n"));
      for (;;) {
        if (!this.sse.has(client)) return;
        const rows = eventsAfter(this.ctx.storage.sql, client.sent, CATCH_UP_PAGE);
        const last = rows.at(-1);
        if (last === undefined) {
          client.live = true;
          return;
        }
        client.sent = last.seq;
        // Awaited: the history goes out as fast as the reader takes it, and no faster.
        await client.writer.write(encoder.encode(sseFrames(rows)));
      }
    } catch {
      this.dropSse(client);
    }
  }

  private writeLive(client: SseClient, rows: StoredEvent[]): void {
    const fresh = rows.filter((row) => row.seq > client.sent);
    const last = fresh.at(-1);
    if (last === undefined) return;
    client.sent = last.seq;
    this.writeUnawaited(client, encoder.encode(sseFrames(fresh)));
  }

  private writeUnawaited(client: SseClient, bytes: Uint8Array): void {
    if (client.unread + bytes.byteLength > this.options.clientBufferBytes) {
      // Cut off: nothing more is written; the stream ends once the reader has taken what it holds.
      this.dropSse(client, encoder.encode(": cut off: too far behind; reconnect with Last-Event-ID\n\n"));
      return;
    }
    client.unread += bytes.byteLength;
    client.writer.write(bytes).then(
      () => {
        client.unread -= bytes.byteLength;
      },
      () => this.dropSse(client),
    );
  }

  private dropSse(client: SseClient, farewell?: Uint8Array): void {
    if (!this.sse.delete(client)) return;
    if (farewell !== undefined) client.writer.write(farewell).catch(() => undefined);
    client.writer.close().catch(() => undefined);
    if (this.sse.size === 0 && this.heartbeat !== null) {
      clearInterval(this.heartbeat);
      this.heartbeat = null;
    }
  }

  private ensureHeartbeat(): void {
    if (this.heartbeat !== null) return;
    const beat = encoder.encode(": heartbeat\n\n");
    this.heartbeat = setInterval(() => {
      for (const client of this.sse) if (client.live) this.writeUnawaited(client, beat);
    }, this.options.heartbeatMs);
  }

  // ---- the end -------------------------------------------------------------------------------

  /** Ends every stream and closes every socket: the conversation is gone. */
  closeAll(body: ErrorBody): void {
    for (const socket of this.ctx.getWebSockets()) {
      try {
        socket.send(errorFrame(body));
        socket.close(SOCKET_CLOSE.NOT_FOUND, typeof body.detail === "string" ? body.detail.slice(0, 120) : body.code);
      } catch {
        // Already closing.
      }
    }
    for (const client of [...this.sse]) this.dropSse(client);
    this.broadcast = 0;
    this.joined.clear();
  }
}
