/**
 * Live event streams, against a floor measured in the same run.
 *   delivery: a fake-model run appends events; each of 1, 10 and 100 WebSocket clients records,
 *             per event, its arrival time minus the event's `timestamp` (set at append).
 *             Floor: a bare Durable Object (bench/floor-worker) broadcasting payloads of the same
 *             size, stamped at send, to the same number of sockets.
 *   catch-up: a conversation with 10,000 events replayed over Server-Sent Events from the start,
 *             against the bare object streaming 10,000 frames of the same size.
 * Run: npm run bench:streams   (writes bench/results/streams.md)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeLlm } from "../test/node/fake-llm.ts";
import { benchHost, describeHost, machine, ms, percentile, ROOT, startSandboxHostProcess, startWorker, waitFor } from "./lib.ts";

const CLIENT_COUNTS = [1, 10, 100];
const STEPS_PER_RUN = 40;
const STEP_DELAY_MS = 10;
const CATCH_UP_EVENTS = 10_000;
const TARGET_P99_MS = 50;
const TARGET_CATCH_UP_MS = 2_000;

const scratch = mkdtempSync(join(tmpdir(), "bench-streams-"));
const host = await startSandboxHostProcess(join(scratch, "sandboxes"), 8783);
const llm = await startFakeLlm();
const worker = await startWorker(8793, join(scratch, "state"), {
  LOCAL_SANDBOX_HOST_URL: host.url,
  LLM_BASE_URL: `${llm.url}/v1`,
  LLM_API_KEY: "bench-llm-key-0123456789",
  AGENT_MAX_ITERATIONS: String(STEPS_PER_RUN + 10),
});
const floor = await startWorker(
  8794,
  join(scratch, "floor"),
  {},
  { config: join(ROOT, "bench", "floor-worker", "wrangler.toml") },
);
const api = (path: string, init?: RequestInit) => fetch(`${worker.url}/api/v1${path}`, init);
const post = async (path: string, body: unknown) => {
  const response = await api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json() as Promise<Record<string, unknown>>;
};

/** Sockets that record, for every event frame, arrival − timestamp; and the frames' sizes. */
async function connectClients(url: string, count: number) {
  const latencies: number[] = [];
  const sizes: number[] = [];
  const received = new Map<WebSocket, number>();
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const socket = new WebSocket(url);
          received.set(socket, 0);
          socket.addEventListener("open", () => resolve(socket));
          socket.addEventListener("error", () => reject(new Error(`could not connect to ${url}`)));
          socket.addEventListener("message", (message) => {
            const arrived = Date.now();
            const text = String(message.data);
            const event = JSON.parse(text) as { id?: string; timestamp?: string; key?: string };
            if (event.key === "full_state" || event.timestamp === undefined) return;
            latencies.push(arrived - Date.parse(event.timestamp));
            sizes.push(text.length);
            received.set(socket, (received.get(socket) ?? 0) + 1);
          });
        }),
    ),
  );
  return {
    latencies,
    sizes,
    perClient: () => [...received.values()],
    close: () => {
      for (const socket of sockets) socket.close();
    },
  };
}

async function conversationStatus(id: string): Promise<string> {
  const conversation = (await (await api(`/app-conversations/${id}`)).json()) as { execution_status: string };
  return conversation.execution_status;
}

/** Starts a conversation (on `sandboxId` when given) whose model thinks STEPS_PER_RUN times. */
async function scriptedConversation(name: string, sandboxId: string | null): Promise<{ id: string; sandboxId: string }> {
  const think = (i: number) => ({
    tool_calls: [{ name: "think", arguments: { thought: `step ${i}` } }],
    delay_ms: STEP_DELAY_MS,
  });
  await fetch(`${llm.url}/scripts/${name}`, {
    method: "PUT",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      turns: [
        ...Array.from({ length: STEPS_PER_RUN }, (_, i) => think(i)),
        { tool_calls: [{ name: "finish", arguments: { message: "done" } }] },
      ],
    }),
  });
  const task = await post("/app-conversations", { llm_model: `openai/${name}`, sandbox_id: sandboxId });
  let result = { id: "", sandboxId: "" };
  await waitFor(
    async () => {
      const [current] = (await (await api(`/app-conversations/start-tasks?ids=${String(task.id)}`)).json()) as {
        status: string;
        detail: string | null;
        app_conversation_id: string | null;
        sandbox_id: string | null;
      }[];
      if (current?.status === "ERROR") throw new Error(`start failed: ${current.detail}`);
      result = { id: current?.app_conversation_id ?? "", sandboxId: current?.sandbox_id ?? "" };
      return current?.status === "READY";
    },
    60_000,
    20,
  );
  return result;
}

/** Reads an SSE answer until `count` events arrived; answers the time from request to the last. */
async function readEvents(url: string, count: number): Promise<{ elapsed: number; bytes: number }> {
  const started = performance.now();
  const response = await fetch(url);
  if (!response.ok || response.body === null) throw new Error(`${url}: ${response.status}`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let events = 0;
  let bytes = 0;
  while (events < count) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    buffered += decoder.decode(value, { stream: true });
    const blocks = buffered.split("\n\n");
    buffered = blocks.pop() ?? "";
    for (const block of blocks) if (block.startsWith("id: ")) events++;
  }
  const elapsed = performance.now() - started;
  await reader.cancel();
  if (events < count) throw new Error(`only ${events} of ${count} events arrived`);
  return { elapsed, bytes };
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);

try {
  const rows: string[] = [];
  let sandboxId: string | null = null;
  let firstConversation = "";
  const verdicts: string[] = [];
  for (const clients of CLIENT_COUNTS) {
    const conversation = await scriptedConversation(`bench-live-${clients}`, sandboxId);
    sandboxId = conversation.sandboxId;
    firstConversation ||= conversation.id;
    const platform = await connectClients(
      `${worker.url.replace("http", "ws")}/api/v1/app-conversations/${conversation.id}/events/socket`,
      clients,
    );
    await post(`/app-conversations/${conversation.id}/send-message`, { content: [{ type: "text", text: "go" }] });
    await waitFor(async () => (await conversationStatus(conversation.id)) === "finished", 120_000, 20);
    const logged = (await (await api(`/events/count?conversation_id__eq=${conversation.id}`)).json()) as number;
    // Every client holds every event after its connect, once: the run's events plus the user message.
    await waitFor(async () => platform.perClient().every((n) => n === logged), 10_000, 10);
    platform.close();

    const bytes = Math.round(mean(platform.sizes));
    const perRun = platform.latencies.length / clients;
    const bare = await connectClients(`${floor.url.replace("http", "ws")}/socket`, clients);
    await fetch(`${floor.url}/broadcast?count=${Math.round(perRun)}&bytes=${bytes}&interval_ms=${STEP_DELAY_MS}`);
    await waitFor(async () => bare.perClient().every((n) => n === Math.round(perRun)), 10_000, 10);
    bare.close();

    const p99 = percentile(platform.latencies, 99);
    if (clients === 100) verdicts.push(`p99 with 100 clients < ${TARGET_P99_MS} ms: ${p99 < TARGET_P99_MS ? "met" : "NOT met"}`);
    rows.push(
      `| ${clients} | ${Math.round(perRun)} × ${bytes} B | ${ms(percentile(bare.latencies, 50))} / ${ms(percentile(bare.latencies, 99))} | ${ms(percentile(platform.latencies, 50))} / ${ms(p99)} |`,
    );
  }

  // Catch-up: 10,000 events in one conversation (user messages that do not run the agent).
  const existing = (await (await api(`/events/count?conversation_id__eq=${firstConversation}`)).json()) as number;
  let next = existing;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < CATCH_UP_EVENTS) {
        next++;
        await post(`/app-conversations/${firstConversation}/send-message`, {
          content: [{ type: "text", text: `note ${next}: the quick brown fox jumps over the lazy dog` }],
          run: false,
        });
      }
    }),
  );
  const total = (await (await api(`/events/count?conversation_id__eq=${firstConversation}`)).json()) as number;
  const replay = await readEvents(`${worker.url}/api/v1/app-conversations/${firstConversation}/events/stream`, total);
  const frameBytes = Math.round(replay.bytes / total);
  const bareReplay = await readEvents(`${floor.url}/stream?count=${total}&bytes=${frameBytes}`, total);
  verdicts.push(
    `catch-up of ${total} events < ${TARGET_CATCH_UP_MS} ms: ${replay.elapsed < TARGET_CATCH_UP_MS ? "met" : "NOT met"}`,
  );

  const report = `# Live streams benchmark

Machine: ${machine()}. Run: ${new Date().toISOString()}. \`npm run bench:streams\` (${describeHost(benchHost())}; local sandbox host; fake model; the floor is bench/floor-worker, a bare Durable Object, run the same way beside it).

Delivery latency: arrival at the client minus the event's \`timestamp\` (taken when it is appended; for the floor, when it is sent), over every event and client of a run of ${STEPS_PER_RUN} agent steps (${STEP_DELAY_MS} ms of model time each). Millisecond resolution.

| WebSocket clients | events per client × mean size | floor: bare object p50 / p99 | platform p50 / p99 |
| --- | --- | --- | --- |
${rows.join("\n")}

Catch-up over Server-Sent Events, from the first event:

| events | floor: bare object | platform |
| --- | --- | --- |
| ${total} (${frameBytes} B per frame) | ${ms(bareReplay.elapsed)} | ${ms(replay.elapsed)} (${Math.round(total / (replay.elapsed / 1000))} events/s) |

Targets: ${verdicts.join("; ")}.
`;
  writeFileSync(join(ROOT, "bench", "results", "streams.md"), report);
  console.log(report);
} finally {
  await worker.stop();
  await floor.stop();
  await host.close();
  await llm.close();
  rmSync(scratch, { recursive: true, force: true });
}
