import { env, evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createLlmProvider, LlmError } from "../../src/agent/llm";
import { call, createUser, json } from "../helpers/api";
import { callWith } from "../helpers/configured";
import {
  conversationEvents,
  modelRequests,
  readyConversation,
  sandboxShell,
  scriptModel,
  userMessage,
  waitForExecution,
} from "../helpers/conversations";
import { waitForStatus } from "../helpers/sandboxes";

type Event = Record<string, unknown> & { kind: string; source: string; id: string; timestamp: string };

const think = (thought: string, extra: Record<string, unknown> = {}) => ({
  tool_calls: [{ name: "think", arguments: { thought } }],
  ...extra,
});
const finish = { tool_calls: [{ name: "finish", arguments: { message: "done" } }] };

async function events(id: string): Promise<Event[]> {
  return (await conversationEvents(id)) as Event[];
}

async function until(predicate: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error("condition not reached");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function statuses(list: Event[]): unknown[] {
  return list.filter((event) => event.kind === "ConversationStateUpdateEvent").map((event) => event.value);
}

async function post(key: string, path: string, body?: unknown): Promise<Response> {
  return call(path, { method: "POST", key, body });
}

describe("the agent loop", () => {
  it("resumes after an eviction mid-run without repeating a completed tool call", async () => {
    const user = await createUser();
    const { llmModel } = await scriptModel(
      [
        { tool_calls: [{ name: "terminal", arguments: { command: "echo run >> count.txt" } }] },
        think("waiting on the model", { delay_ms: 1500 }),
        think("after the eviction"),
        finish,
        // The evicted instance may still spend a turn while it drains: the script never runs dry.
      ],
      true,
    );
    const conversation = await readyConversation(user.key, { llm_model: llmModel, initial_message: userMessage("count once") });
    // Polled through the API: a stub the test holds would keep the object from being evicted.
    await until(
      async () =>
        (await json<number>(
          await call(`/api/v1/events/count?conversation_id__eq=${conversation.id}&kind__eq=ObservationEvent`, { key: user.key }),
        )) > 0,
    );
    await evictDurableObject(env.CONVERSATION.getByName(conversation.id));
    // The alarm is the loop's watchdog: run it now rather than wait for it.
    expect(await runDurableObjectAlarm(env.CONVERSATION.getByName(conversation.id))).toBe(true);
    const done = await waitForExecution(user.key, conversation.id, ["finished", "error"]);
    expect(done.execution_status).toBe("finished");
    expect((await sandboxShell(user.key, done.sandbox_id, "cat count.txt")).stdout).toBe("run\n");
    const log = await events(conversation.id);
    expect(log.filter((event) => event.kind === "ActionEvent" && event.tool_name === "terminal")).toHaveLength(1);
  });

  it("pauses between steps with a PauseEvent, and run continues where it stopped", async () => {
    const user = await createUser();
    const { llmModel } = await scriptModel([think("one"), think("two", { delay_ms: 800 }), think("three"), finish]);
    const conversation = await readyConversation(user.key, { llm_model: llmModel });
    expect((await post(user.key, `/api/v1/app-conversations/${conversation.id}/send-message`, userMessage("go"))).status).toBe(
      200,
    );
    await until(async () => (await events(conversation.id)).some((event) => event.kind === "ObservationEvent"));
    expect((await post(user.key, `/api/v1/app-conversations/${conversation.id}/pause`)).status).toBe(200);
    await waitForExecution(user.key, conversation.id, ["paused"]);
    const paused = await events(conversation.id);
    expect(paused.some((event) => event.kind === "PauseEvent")).toBe(true);
    // The turn in flight when the pause came was recorded; its tool call waits for `run`.
    expect(paused.filter((event) => event.kind === "ActionEvent")).toHaveLength(2);
    expect(paused.filter((event) => event.kind === "ObservationEvent")).toHaveLength(1);
    expect((await post(user.key, `/api/v1/app-conversations/${conversation.id}/run`)).status).toBe(200);
    await waitForExecution(user.key, conversation.id, ["finished"]);
    const log = await events(conversation.id);
    expect(statuses(log)).toEqual(["running", "paused", "running", "finished"]);
    expect(
      log.filter((event) => event.kind === "ActionEvent").map((event) => (event.action as { thought?: string }).thought),
    ).toEqual(["one", "two", "three", undefined]);
  });

  it("detects a stuck agent", async () => {
    const user = await createUser();
    const { llmModel } = await scriptModel([{ tool_calls: [{ name: "terminal", arguments: { command: "echo same" } }] }], true);
    const conversation = await readyConversation(user.key, { llm_model: llmModel, initial_message: userMessage("loop") });
    const done = await waitForExecution(user.key, conversation.id, ["stuck", "error", "finished"]);
    expect(done.execution_status).toBe("stuck");
    const log = await events(conversation.id);
    expect(log.filter((event) => event.kind === "ObservationEvent")).toHaveLength(4);
    expect(log.at(-2)).toMatchObject({ kind: "ConversationErrorEvent", code: "AGENT_STUCK" });
  });

  it("ends the run at max_iterations", async () => {
    const user = await createUser();
    const { llmModel, name } = await scriptModel(Array.from({ length: 12 }, (_, i) => think(`step ${i}`)));
    const conversation = await readyConversation(user.key, {
      llm_model: llmModel,
      initial_message: userMessage("go on forever"),
    });
    const done = await waitForExecution(user.key, conversation.id, ["error", "finished", "stuck"]);
    expect(done.execution_status).toBe("error");
    const log = await events(conversation.id);
    expect(log.find((event) => event.kind === "ConversationErrorEvent")).toMatchObject({ code: "MAX_ITERATIONS_REACHED" });
    expect(await modelRequests(name)).toHaveLength(8);
  });

  it("retries a 429 honouring Retry-After, then succeeds", async () => {
    const user = await createUser();
    const { llmModel, name } = await scriptModel([{ status: 429, retry_after: "0.2" }, { status: 503 }, finish]);
    const conversation = await readyConversation(user.key, { llm_model: llmModel, initial_message: userMessage("try") });
    const done = await waitForExecution(user.key, conversation.id, ["finished", "error"]);
    expect(done.execution_status).toBe("finished");
    expect(await modelRequests(name)).toHaveLength(3);
  });

  it("ends in error with a clear detail when the model rejects the key, or does not exist", async () => {
    const user = await createUser();
    const { llmModel } = await scriptModel([{ status: 401 }]);
    const rejected = await readyConversation(user.key, { llm_model: llmModel, initial_message: userMessage("try") });
    expect((await waitForExecution(user.key, rejected.id, ["error", "finished"])).execution_status).toBe("error");
    expect((await events(rejected.id)).find((event) => event.kind === "ConversationErrorEvent")).toMatchObject({
      code: "LLM_AUTH_FAILED",
      detail: expect.stringContaining("LLM_API_KEY"),
    });
    const unknown = await readyConversation(user.key, { llm_model: "openai/no-such-model", initial_message: userMessage("try") });
    await waitForExecution(user.key, unknown.id, ["error"]);
    expect((await events(unknown.id)).find((event) => event.kind === "ConversationErrorEvent")).toMatchObject({
      code: "LLM_MODEL_NOT_FOUND",
      detail: expect.stringContaining("openai/no-such-model"),
    });
  });

  it("says clearly when no model is configured", async () => {
    const provider = createLlmProvider("openai/anything", { ...env, LLM_API_KEY: "" });
    const failure = await provider.complete({ system: "", messages: [], tools: {} }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(LlmError);
    expect(failure).toMatchObject({ code: "LLM_NOT_CONFIGURED", detail: expect.stringContaining("LLM_API_KEY") });
  });

  it("gives the model an error it can act on for a non-unique str_replace", async () => {
    const user = await createUser();
    const { llmModel, name } = await scriptModel([
      { tool_calls: [{ name: "file_editor", arguments: { command: "create", path: "dup.txt", file_text: "x = 1\nx = 1\n" } }] },
      {
        tool_calls: [
          { name: "file_editor", arguments: { command: "str_replace", path: "dup.txt", old_str: "x = 1", new_str: "x = 2" } },
        ],
      },
      {
        tool_calls: [{ name: "file_editor", arguments: { command: "str_replace", path: "dup.txt", old_str: "y", new_str: "z" } }],
      },
      { tool_calls: [{ name: "file_editor", arguments: { command: "undo_edit", path: "dup.txt" } }] },
      finish,
    ]);
    const conversation = await readyConversation(user.key, { llm_model: llmModel, initial_message: userMessage("edit") });
    await waitForExecution(user.key, conversation.id, ["finished", "error"]);
    const errors = (await events(conversation.id)).filter((event) => event.kind === "AgentErrorEvent");
    expect(errors.map((event) => event.error)).toEqual([
      expect.stringMatching(/old_str appears 2 times in .*dup\.txt \(lines 1, 2\)/),
      expect.stringMatching(/old_str did not appear verbatim/),
    ]);
    const requests = await modelRequests(name);
    expect(JSON.stringify(requests[2]?.body.messages)).toContain("appears 2 times");
    // undo_edit of the creation removed the file.
    expect((await sandboxShell(user.key, conversation.sandbox_id, "ls dup.txt 2>&1; true")).stdout).toContain("No such file");
  });

  it("stops paused when its sandbox is paused mid-run, and continues after resume and run", async () => {
    const user = await createUser();
    const { llmModel } = await scriptModel([
      { delay_ms: 1200, tool_calls: [{ name: "terminal", arguments: { command: "echo after-resume > out.txt" } }] },
      finish,
    ]);
    const conversation = await readyConversation(user.key, { llm_model: llmModel, initial_message: userMessage("work") });
    expect((await post(user.key, `/api/v1/sandboxes/${conversation.sandbox_id}/pause`)).status).toBe(200);
    const stopped = await waitForExecution(user.key, conversation.id, ["paused", "error"]);
    expect(stopped.execution_status).toBe("paused");
    expect((await events(conversation.id)).find((event) => event.kind === "ConversationErrorEvent")).toMatchObject({
      code: "SANDBOX_NOT_RUNNING",
    });
    expect((await post(user.key, `/api/v1/sandboxes/${conversation.sandbox_id}/resume`)).status).toBe(200);
    await waitForStatus(user.key, conversation.sandbox_id, ["RUNNING"]);
    expect((await post(user.key, `/api/v1/app-conversations/${conversation.id}/run`)).status).toBe(200);
    await waitForExecution(user.key, conversation.id, ["finished"]);
    expect((await sandboxShell(user.key, conversation.sandbox_id, "cat out.txt")).stdout).toBe("after-resume\n");
  });

  it("keeps its sandbox from idle pause while it waits on a model call longer than the idle timeout", async () => {
    const user = await createUser();
    const started = await callWith({ SANDBOX_IDLE_TIMEOUT_SECONDS: "1" }, "/api/v1/sandboxes?sandbox_spec_id=slim", {
      method: "POST",
      headers: { Authorization: `Bearer ${user.key}` },
    });
    const sandbox = await json<{ id: string }>(started);
    await waitForStatus(user.key, sandbox.id, ["RUNNING"]);
    const { llmModel, name } = await scriptModel([{ delay_ms: 2500, ...finish }]);
    const conversation = await readyConversation(user.key, {
      llm_model: llmModel,
      sandbox_id: sandbox.id,
      initial_message: userMessage("take your time"),
    });
    await until(async () => (await modelRequests(name)).length === 1);
    // The model has been thinking for longer than the idle timeout when the idle check runs.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await runDurableObjectAlarm(env.SANDBOX.getByName(sandbox.id));
    expect((await waitForStatus(user.key, sandbox.id, ["RUNNING", "PAUSED"])).status).toBe("RUNNING");
    expect((await waitForExecution(user.key, conversation.id, ["finished", "error", "paused"])).execution_status).toBe(
      "finished",
    );
  });

  it("plan agents change only PLAN.md and have no terminal", async () => {
    const user = await createUser();
    const { llmModel, name } = await scriptModel([
      { tool_calls: [{ name: "file_editor", arguments: { command: "create", path: "PLAN.md", file_text: "# Plan\n" } }] },
      { tool_calls: [{ name: "file_editor", arguments: { command: "create", path: "other.txt", file_text: "no" } }] },
      { tool_calls: [{ name: "terminal", arguments: { command: "touch hacked" } }] },
      finish,
    ]);
    const conversation = await readyConversation(user.key, {
      llm_model: llmModel,
      agent_type: "plan",
      initial_message: userMessage("plan"),
    });
    await waitForExecution(user.key, conversation.id, ["finished", "error"]);
    const files = await sandboxShell(user.key, conversation.sandbox_id, "ls");
    expect(files.stdout).toBe("PLAN.md\n");
    const errors = (await events(conversation.id))
      .filter((event) => event.kind === "AgentErrorEvent")
      .map((event) => event.tool_name);
    expect(errors).toEqual(["file_editor", "terminal"]);
    const [firstRequest] = await modelRequests(name);
    const tools = (firstRequest?.body as unknown as { tools: { function: { name: string } }[] } | undefined)?.tools ?? [];
    expect(tools.map((tool) => tool.function.name).sort()).toEqual(["file_editor", "finish", "task_tracker", "think"]);
  });
});

describe("event search across conversations", () => {
  it("pages in timestamp order without gaps or repeats, counts agree, and other users see nothing", async () => {
    const user = await createUser();
    const a = await scriptModel([think("a1"), finish]);
    const b = await scriptModel([think("b1"), finish]);
    const first = await readyConversation(user.key, { llm_model: a.llmModel, initial_message: userMessage("first") });
    const second = await readyConversation(user.key, { llm_model: b.llmModel, initial_message: userMessage("second") });
    await waitForExecution(user.key, first.id, ["finished"]);
    await waitForExecution(user.key, second.id, ["finished"]);
    const all = [...(await events(first.id)), ...(await events(second.id))];
    for (const order of ["TIMESTAMP", "TIMESTAMP_DESC"]) {
      const seen: Event[] = [];
      let pageId: string | null = null;
      do {
        const suffix: string = pageId === null ? "" : `&page_id=${pageId}`;
        const page: { items: Event[]; next_page_id: string | null } = await json(
          await call(`/api/v1/events/search?limit=3&sort_order=${order}${suffix}`, { key: user.key }),
        );
        seen.push(...page.items);
        pageId = page.next_page_id;
      } while (pageId !== null);
      expect(seen.map((event) => event.id).sort()).toEqual(all.map((event) => event.id).sort());
      const stamps = seen.map((event) => event.timestamp);
      const sorted = [...stamps].sort();
      expect(stamps).toEqual(order === "TIMESTAMP" ? sorted : sorted.reverse());
    }
    expect(await json<number>(await call("/api/v1/events/count", { key: user.key }))).toBe(all.length);
    expect(await json<number>(await call("/api/v1/events/count?kind__eq=PauseEvent", { key: user.key }))).toBe(0);
    const some = all[3] as Event;
    const stranger = await createUser();
    expect(await json<number>(await call("/api/v1/events/count", { key: stranger.key }))).toBe(0);
    expect(await json(await call(`/api/v1/events?id=${some.id}&id=nope`, { key: stranger.key }))).toEqual([null, null]);
    expect(await json(await call(`/api/v1/events?id=${some.id}&id=nope`, { key: user.key }))).toEqual([some, null]);
    const other = await json<{ items: unknown[] }>(
      await call(`/api/v1/events/search?conversation_id__eq=${first.id}`, { key: stranger.key }),
    );
    expect(other.items).toEqual([]);
  });
});
