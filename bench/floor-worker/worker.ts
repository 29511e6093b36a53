/**
 * The floor of bench/streams.ts: one bare Durable Object with hibernatable sockets and nothing
 * else. `/socket` joins; `/broadcast?count&bytes&interval_ms` sends `count` payloads of `bytes`
 * bytes, each stamped with its send time, to every socket; `/stream?count&bytes` writes `count`
 * Server-Sent Events frames of `bytes` bytes, 500 to a write, paced by the reader.
 *
 * Also a floor of bench/sandboxes.ts, the storage path of a snapshot with nothing else on the
 * way: `POST /object/{key}?from=URL` streams what URL answers into the local R2 simulator, and
 * `POST /object/{key}?to=URL` streams the object back to URL in a PUT.
 */
import { DurableObject } from "cloudflare:workers";

interface FloorEnv {
  FLOOR: DurableObjectNamespace<Floor>;
  FLOOR_BUCKET: R2Bucket;
}

function payload(bytes: number, index: number): string {
  const base = JSON.stringify({ id: String(index), timestamp: new Date().toISOString(), pad: "" });
  return JSON.stringify({
    id: String(index),
    timestamp: new Date().toISOString(),
    pad: "x".repeat(Math.max(0, bytes - base.length)),
  });
}

export class Floor extends DurableObject<FloorEnv> {
  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const count = Number(url.searchParams.get("count") ?? "0");
    const bytes = Number(url.searchParams.get("bytes") ?? "0");
    if (url.pathname === "/socket") {
      const { 0: client, 1: server } = new WebSocketPair();
      this.ctx.acceptWebSocket(server);
      return new Response(null, { status: 101, webSocket: client });
    }
    if (url.pathname === "/broadcast") {
      const interval = Number(url.searchParams.get("interval_ms") ?? "0");
      for (let index = 0; index < count; index++) {
        const text = payload(bytes, index);
        for (const socket of this.ctx.getWebSockets()) socket.send(text);
        await scheduler.wait(interval);
      }
      return new Response("sent");
    }
    if (url.pathname === "/stream") {
      const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
      const writer = writable.getWriter();
      const encoder = new TextEncoder();
      const write = async () => {
        for (let start = 0; start < count; start += 500) {
          let text = "";
          for (let index = start; index < Math.min(count, start + 500); index++) {
            text += `id: ${index + 1}\ndata: ${payload(bytes, index)}\n\n`;
          }
          await writer.write(encoder.encode(text));
        }
        await writer.close();
      };
      this.ctx.waitUntil(write());
      return new Response(readable, { headers: { "Content-Type": "text/event-stream" } });
    }
    return new Response("not found", { status: 404 });
  }
}

async function object(request: Request, env: FloorEnv, key: string): Promise<Response> {
  const url = new URL(request.url);
  const from = url.searchParams.get("from");
  if (from !== null) {
    const source = await fetch(from);
    const stored = await env.FLOOR_BUCKET.put(key, source.body);
    return Response.json({ size: stored?.size ?? 0 });
  }
  const found = await env.FLOOR_BUCKET.get(key);
  if (found === null) return new Response("not found", { status: 404 });
  const sent = await fetch(url.searchParams.get("to") ?? "", {
    method: "PUT",
    body: found.body,
    headers: { "Content-Length": String(found.size) },
  });
  return new Response(sent.body, { status: sent.status });
}

export default {
  fetch(request: Request, env: FloorEnv): Promise<Response> {
    const path = new URL(request.url).pathname;
    if (path.startsWith("/object/")) return object(request, env, path.slice("/object/".length));
    return env.FLOOR.getByName("floor").fetch(request);
  },
};
