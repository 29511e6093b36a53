import { expect } from "vitest";
import { call } from "./api";

export type Frame = Record<string, unknown> & { id?: string; kind?: string; code?: string };

async function until<T>(check: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A client of the event socket that keeps every frame it receives. */
export class SocketClient {
  readonly frames: Frame[] = [];
  readonly raw: string[] = [];
  closed: { code: number; reason: string } | null = null;

  constructor(readonly socket: WebSocket) {
    socket.accept();
    socket.addEventListener("message", (event) => {
      const text = typeof event.data === "string" ? event.data : new TextDecoder().decode(event.data as ArrayBuffer);
      this.raw.push(text);
      try {
        this.frames.push(JSON.parse(text) as Frame);
      } catch {
        // Raw frames (pong) are kept in `raw` only.
      }
    });
    socket.addEventListener("close", (event) => {
      this.closed = { code: event.code, reason: event.reason };
    });
  }

  static async connect(path: string, key: string | null, headers: Record<string, string> = {}): Promise<SocketClient> {
    const response = await call(path, { key, headers: { Upgrade: "websocket", ...headers } });
    expect(response.status).toBe(101);
    const socket = response.webSocket;
    if (socket === null) throw new Error("no socket in the answer");
    return new SocketClient(socket);
  }

  /** Events only (frames with an id of the log), in arrival order. */
  get events(): Frame[] {
    return this.frames.filter((frame) => typeof frame.id === "string" && /^[0-9a-f]{32}-\d+$/.test(frame.id));
  }

  async waitFor(predicate: (frame: Frame) => boolean, timeoutMs = 20_000): Promise<Frame> {
    return until(() => this.frames.find(predicate), timeoutMs, "a socket frame");
  }

  async waitForClose(timeoutMs = 10_000): Promise<{ code: number; reason: string }> {
    return until(() => this.closed ?? undefined, timeoutMs, "the socket to close");
  }

  send(data: unknown): void {
    this.socket.send(typeof data === "string" ? data : JSON.stringify(data));
  }

  close(): void {
    this.socket.close(1000, "done");
  }
}

export interface SseFrame {
  id: string | null;
  data: Frame | null;
  comment: string | null;
}

/** A reader of a Server-Sent Events answer that parses frames as they arrive. */
export class SseClient {
  readonly frames: SseFrame[] = [];
  ended = false;
  failed: unknown = null;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private buffered = "";
  private paused: { promise: Promise<void>; resume: () => void } | null = null;

  constructor(readonly response: Response) {
    if (response.body === null) throw new Error("no body");
    this.reader = response.body.getReader();
    void this.pump();
  }

  static async connect(path: string, key: string | null, headers: Record<string, string> = {}): Promise<SseClient> {
    const response = await call(path, { key, headers });
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toContain("text/event-stream");
    return new SseClient(response);
  }

  private async pump(): Promise<void> {
    const decoder = new TextDecoder();
    try {
      for (;;) {
        if (this.paused !== null) await this.paused.promise;
        const { done, value } = await this.reader.read();
        if (done) break;
        this.buffered += decoder.decode(value, { stream: true });
        let end = this.buffered.indexOf("\n\n");
        while (end >= 0) {
          this.parse(this.buffered.slice(0, end));
          this.buffered = this.buffered.slice(end + 2);
          end = this.buffered.indexOf("\n\n");
        }
      }
    } catch (error) {
      this.failed = error;
    }
    this.ended = true;
  }

  private parse(block: string): void {
    const frame: SseFrame = { id: null, data: null, comment: null };
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) frame.comment = line.slice(1).trim();
      else if (line.startsWith("id: ")) frame.id = line.slice(4);
      else if (line.startsWith("data: ")) frame.data = JSON.parse(line.slice(6)) as Frame;
    }
    this.frames.push(frame);
  }

  /** Stops reading (after the read in flight): the server sees a client that does not keep up. */
  pause(): void {
    const { promise, resolve } = Promise.withResolvers<void>();
    this.paused = { promise, resume: resolve };
  }

  resume(): void {
    this.paused?.resume();
    this.paused = null;
  }

  get events(): Frame[] {
    return this.frames.flatMap((frame) => (frame.data === null ? [] : [frame.data]));
  }

  get lastId(): string | null {
    return this.frames.filter((frame) => frame.id !== null).at(-1)?.id ?? null;
  }

  async waitFor(predicate: (event: Frame) => boolean, timeoutMs = 20_000): Promise<Frame> {
    return until(() => this.events.find(predicate), timeoutMs, "an SSE event");
  }

  async waitForEnd(timeoutMs = 10_000): Promise<void> {
    await until(() => (this.ended ? true : undefined), timeoutMs, "the stream to end");
  }

  async close(): Promise<void> {
    await this.reader.cancel().catch(() => undefined);
  }
}

/** The sequence number of an event id `<conversation>-<seq>`. */
export function seqOf(event: Frame): number {
  return Number(String(event.id).split("-")[1]);
}
