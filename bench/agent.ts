/**
 * The agent loop's own overhead per step, against its floor measured in the same run.
 *   floor: the same tool call (`true` in a persistent shell session) made straight to a runtime
 *   step:  one loop step through the platform: a model turn from a fake model that answers at
 *          once, its checkpoint, the tool call through the SandboxDO to the runtime, its checkpoint
 *   overhead per step = step time − floor (p50); plus a 100-step conversation end to end.
 * Run: npm run bench:agent   (writes bench/results/agent.md)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeLlm } from "../test/node/fake-llm.ts";
import {
  benchHost,
  describeHost,
  FLOOR_TOKEN,
  machine,
  ms,
  percentile,
  ROOT,
  spawnFloorRuntime,
  startSandboxHostProcess,
  startWorker,
  waitFor,
} from "./lib.ts";

const STEPS = 100;
const FLOOR_RUNS = 200;
const TARGET_P50_MS = 15;

/** Reads Server-Sent Events until the execution status becomes finished, error or stuck. */
async function untilExecutionEnds(stream: Response): Promise<string> {
  if (stream.body === null) throw new Error("no event stream");
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of stream.body) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end !== -1) {
      const data = buffer
        .slice(0, end)
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trim())
        .join("\n");
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      if (data === "") continue;
      const event = JSON.parse(data) as { kind: string; key?: string; value?: unknown };
      if (event.kind === "ConversationStateUpdateEvent" && event.key === "execution_status") {
        // Leaving the loop cancels the stream.
        if (event.value === "finished" || event.value === "error" || event.value === "stuck") return event.value;
      }
    }
  }
  throw new Error("the event stream ended before the run did");
}

const scratch = mkdtempSync(join(tmpdir(), "bench-agent-"));
const host = await startSandboxHostProcess(join(scratch, "sandboxes"), 8782);
const llm = await startFakeLlm();
const worker = await startWorker(8791, join(scratch, "state"), {
  LOCAL_SANDBOX_HOST_URL: host.url,
  LLM_BASE_URL: `${llm.url}/v1`,
  LLM_API_KEY: "bench-llm-key-0123456789",
  AGENT_MAX_ITERATIONS: String(STEPS + 10),
});
const api = (path: string, init?: RequestInit) => fetch(`${worker.url}/api/v1${path}`, init);
const post = (path: string, body: unknown) =>
  api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });

try {
  // Floor: the tool call straight to a runtime's shell session.
  const floorDir = mkdtempSync(join(scratch, "floor-"));
  const { port, child } = await spawnFloorRuntime(floorDir);
  const headers = { Authorization: `Bearer ${FLOOR_TOKEN}`, "Content-Type": "application/json" };
  await fetch(`http://127.0.0.1:${port}/sessions`, { method: "POST", headers, body: JSON.stringify({ id: "agent" }) });
  const floor: number[] = [];
  for (let i = 0; i < FLOOR_RUNS; i++) {
    const started = performance.now();
    const response = await fetch(`http://127.0.0.1:${port}/sessions/agent/run`, {
      method: "POST",
      headers,
      body: JSON.stringify({ command: "true", timeout_ms: 10_000 }),
    });
    await response.json();
    floor.push(performance.now() - started);
  }
  child.kill();

  // The platform: a conversation whose model asks for `true` in the terminal STEPS times.
  const model = "bench-steps";
  await fetch(`${llm.url}/scripts/${model}`, {
    method: "PUT",
    headers: { "Content-Type": "application/json" },
    // Each turn repeats the same call; vary it so that the stuck detector stays out of the way.
    body: JSON.stringify({
      turns: [
        ...Array.from({ length: STEPS }, (_, i) => ({ tool_calls: [{ name: "terminal", arguments: { command: `true ${i}` } }] })),
        { tool_calls: [{ name: "finish", arguments: { message: "done" } }] },
      ],
    }),
  });
  const task = (await (await post("/app-conversations", { llm_model: `openai/${model}` })).json()) as { id: string };
  let conversationId = "";
  await waitFor(
    async () => {
      const [current] = (await (await api(`/app-conversations/start-tasks?ids=${task.id}`)).json()) as {
        status: string;
        app_conversation_id: string | null;
      }[];
      if (current?.status === "ERROR") throw new Error("start failed");
      conversationId = current?.app_conversation_id ?? "";
      return current?.status === "READY";
    },
    60_000,
    20,
  );
  // The end is read from the live event stream (as a client would), not by polling: polling
  // would load the same object the loop runs in.
  const stream = await api(`/app-conversations/${conversationId}/events/stream`);
  const finished = untilExecutionEnds(stream);
  const started = performance.now();
  await post(`/app-conversations/${conversationId}/send-message`, { content: [{ type: "text", text: "go" }] });
  const final = await finished;
  if (final !== "finished") throw new Error(`the conversation ended ${final}`);
  const endToEnd = performance.now() - started;

  // Step times from the event log: one observation to the next spans a model turn and a tool call.
  const observed: number[] = [];
  let pageId: string | null = null;
  do {
    const suffix: string = pageId === null ? "" : `&page_id=${pageId}`;
    const page = (await (
      await api(`/events/search?conversation_id__eq=${conversationId}&kind__eq=ObservationEvent&limit=100${suffix}`)
    ).json()) as { items: { timestamp: string }[]; next_page_id: string | null };
    observed.push(...page.items.map((event) => Date.parse(event.timestamp)));
    pageId = page.next_page_id;
  } while (pageId !== null);
  const steps = observed.slice(1).map((at, i) => at - (observed[i] ?? at));
  const floorP50 = percentile(floor, 50);
  const stepP50 = percentile(steps, 50);
  const overheadP50 = stepP50 - floorP50;
  const verdict = overheadP50 <= TARGET_P50_MS ? "met" : "NOT met";

  const report = `# Agent loop benchmark

Machine: ${machine()}. Run: ${new Date().toISOString()}. \`npm run bench:agent\` (${describeHost(benchHost())}; local sandbox host; fake model answering at once).

| measure | floor (same run) | through the platform | overhead |
| --- | --- | --- | --- |
| one step (model turn + \`true\` in the terminal), p50 of ${steps.length} | the tool call straight to a runtime session: ${ms(floorP50)} (p99 ${ms(percentile(floor, 99))}) | ${ms(stepP50)} (p99 ${ms(percentile(steps, 99))}) | ${ms(overheadP50)} per step (target p50 < ${TARGET_P50_MS} ms: ${verdict}) |
| ${STEPS}-step conversation end to end (send-message → finished) | ${ms(floorP50 * STEPS)} of tool calls | ${ms(endToEnd)} | ${ms(endToEnd / STEPS)} per step |

Event timestamps have millisecond resolution; the step time includes the fake model's HTTP round trip.
`;
  writeFileSync(join(ROOT, "bench", "results", "agent.md"), report);
  console.log(report);
} finally {
  await worker.stop();
  await host.close();
  await llm.close();
  rmSync(scratch, { recursive: true, force: true });
}
