/**
 * A fake OpenAI-compatible chat completions server on 127.0.0.1 for the tests and benchmarks.
 * A test registers a script (its model name) of turns; each `POST /v1/chat/completions` for
 * that model answers the next turn, so the real provider, HTTP and parsing path runs. Every
 * request is recorded, with its headers, for the test to inspect.
 *
 *   PUT  /scripts/{model}           {turns: Turn[], repeat_last?: boolean}
 *   GET  /scripts/{model}/requests  the requests received, oldest first
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Turn {
  /** Answer this HTTP status with an error body instead of a completion. */
  status?: number;
  retry_after?: string;
  content?: string;
  tool_calls?: { name: string; arguments: Record<string, unknown> }[];
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Wait this long before answering. */
  delay_ms?: number;
}

interface Script {
  turns: Turn[];
  next: number;
  repeat_last: boolean;
  requests: { headers: Record<string, string | string[] | undefined>; body: unknown }[];
}

export interface FakeLlm {
  url: string;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

let callCounter = 0;

function completion(model: string, turn: Turn): unknown {
  const toolCalls = (turn.tool_calls ?? []).map((call) => ({
    id: `call_${++callCounter}`,
    type: "function",
    function: { name: call.name, arguments: JSON.stringify(call.arguments) },
  }));
  return {
    id: `chatcmpl-${callCounter}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: turn.content ?? null, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
        finish_reason: toolCalls.length > 0 ? "tool_calls" : "stop",
      },
    ],
    usage: {
      prompt_tokens: turn.usage?.prompt_tokens ?? 10,
      completion_tokens: turn.usage?.completion_tokens ?? 5,
      total_tokens: (turn.usage?.prompt_tokens ?? 10) + (turn.usage?.completion_tokens ?? 5),
    },
  };
}

export async function startFakeLlm(): Promise<FakeLlm> {
  const scripts = new Map<string, Script>();
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://llm.test");
    const scriptPath = /^\/scripts\/([^/]+)(\/requests)?$/.exec(url.pathname);
    if (scriptPath && req.method === "PUT" && !scriptPath[2]) {
      const body = JSON.parse(await readBody(req)) as { turns: Turn[]; repeat_last?: boolean };
      scripts.set(decodeURIComponent(scriptPath[1] ?? ""), {
        turns: body.turns,
        next: 0,
        repeat_last: body.repeat_last ?? false,
        requests: [],
      });
      return send(res, 200, { ok: true });
    }
    if (scriptPath?.[2] && req.method === "GET") {
      return send(res, 200, scripts.get(decodeURIComponent(scriptPath[1] ?? ""))?.requests ?? []);
    }
    if (url.pathname === "/v1/chat/completions" && req.method === "POST") {
      const body = JSON.parse(await readBody(req)) as { model: string };
      const script = scripts.get(body.model);
      if (!script)
        return send(res, 404, {
          error: { message: `The model '${body.model}' does not exist`, type: "invalid_request_error", code: "model_not_found" },
        });
      script.requests.push({ headers: req.headers, body });
      const turn = script.turns[script.next] ?? (script.repeat_last ? script.turns.at(-1) : undefined);
      if (script.next < script.turns.length) script.next++;
      if (!turn) return send(res, 500, { error: { message: "the script has no more turns", type: "server_error" } });
      if (turn.delay_ms) await new Promise((resolve) => setTimeout(resolve, turn.delay_ms));
      if (turn.status && turn.status !== 200) {
        const headers: Record<string, string> = turn.retry_after ? { "Retry-After": turn.retry_after } : {};
        const message =
          turn.status === 401 ? "Incorrect API key provided" : turn.status === 429 ? "Rate limit reached" : "upstream error";
        return send(res, turn.status, { error: { message, type: "error", code: String(turn.status) } }, headers);
      }
      return send(res, 200, completion(body.model, turn));
    }
    send(res, 404, { error: { message: "not found" } });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
