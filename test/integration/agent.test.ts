import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, createUser, expectError, json } from "../helpers/api";
import {
  conversationEvents,
  GIT_TOKEN,
  modelRequests,
  readyConversation,
  sandboxShell,
  scriptModel,
  storeToken,
  userMessage,
  waitForExecution,
} from "../helpers/conversations";

type Event = Record<string, unknown> & { kind: string; source: string; id: string };

function story(events: Event[]): string[] {
  return events.map((event) => {
    if (event.kind === "ActionEvent") return `action:${event.tool_name}`;
    if (event.kind === "ObservationEvent") return `observation:${event.tool_name}`;
    if (event.kind === "AgentErrorEvent") return `error:${event.tool_name}`;
    if (event.kind === "ConversationStateUpdateEvent") return `status:${event.value}`;
    if (event.kind === "MessageEvent") return `message:${event.source}`;
    return event.kind;
  });
}

describe("the agent fixes a failing test end to end", () => {
  it("views, edits, runs the tests and finishes; the events tell the story; metrics add up", async () => {
    const user = await createUser();
    await storeToken(user.key);
    const { llmModel, name } = await scriptModel([
      {
        tool_calls: [{ name: "file_editor", arguments: { command: "view", path: "calc.js" } }],
        usage: { prompt_tokens: 100, completion_tokens: 10 },
      },
      {
        content: "The add function subtracts; fixing it.",
        tool_calls: [
          { name: "file_editor", arguments: { command: "str_replace", path: "calc.js", old_str: "a - b", new_str: "a + b" } },
        ],
        usage: { prompt_tokens: 200, completion_tokens: 20 },
      },
      {
        tool_calls: [{ name: "terminal", arguments: { command: "node test.js" } }],
        usage: { prompt_tokens: 300, completion_tokens: 30 },
      },
      {
        tool_calls: [{ name: "finish", arguments: { message: "Fixed add(); the tests pass." } }],
        usage: { prompt_tokens: 400, completion_tokens: 40 },
      },
    ]);
    const conversation = await readyConversation(user.key, {
      selected_repository: "acme/calc",
      llm_model: llmModel,
      initial_message: userMessage("The unit test fails. Fix it."),
    });
    const done = await waitForExecution(user.key, conversation.id, ["finished", "error", "stuck"]);
    expect(done.execution_status).toBe("finished");
    expect(done.metrics.accumulated_token_usage).toMatchObject({ prompt_tokens: 1000, completion_tokens: 100 });

    // The file is fixed in the sandbox and the tests pass there.
    expect((await sandboxShell(user.key, done.sandbox_id, "cat calc.js", "calc")).stdout).toBe(
      "exports.add = (a, b) => a + b;\n",
    );
    const tests = await sandboxShell(user.key, done.sandbox_id, "node test.js", "calc");
    expect(tests).toMatchObject({ exit_code: 0, stdout: "all tests passed\n" });

    const events = (await conversationEvents(conversation.id)) as Event[];
    expect(story(events)).toEqual([
      "message:user",
      "status:running",
      "SystemPromptEvent",
      "action:file_editor",
      "observation:file_editor",
      "action:file_editor",
      "observation:file_editor",
      "action:terminal",
      "observation:terminal",
      "action:finish",
      "observation:finish",
      "status:finished",
    ]);
    const terminal = events.find((event) => event.kind === "ObservationEvent" && event.tool_name === "terminal");
    expect(terminal?.observation).toMatchObject({ command: "node test.js", exit_code: 0, output: "all tests passed\n" });
    const edit = events.findIndex(
      (event) => event.kind === "ActionEvent" && (event.action as { command?: string }).command === "str_replace",
    );
    expect(events[edit]).toMatchObject({ thought: "The add function subtracts; fixing it.", source: "agent" });
    expect(events[edit + 1]?.action_id).toBe(events[edit]?.id);

    // The model saw the tool results, through the real OpenAI-compatible path.
    const requests = await modelRequests(name);
    expect(requests).toHaveLength(4);
    expect(requests[0]?.headers.authorization).toBe(`Bearer ${env.LLM_API_KEY}`);
    expect(JSON.stringify(requests[1]?.body.messages)).toContain("exports.add = (a, b) => a - b;");
    expect(JSON.stringify(requests[3]?.body.messages)).toContain("all tests passed");

    // No secret reached an event or the sandbox.
    const everything = JSON.stringify(events);
    for (const secret of [env.LLM_API_KEY, GIT_TOKEN]) {
      expect(everything).not.toContain(secret);
      const grep = await sandboxShell(user.key, done.sandbox_id, `env | grep -cF '${secret}'; grep -rlaF '${secret}' . ; true`);
      expect(grep.stdout).toBe("0\n");
    }

    // The events routes agree.
    const page = await json<{ items: Event[] }>(
      await call(`/api/v1/events/search?conversation_id__eq=${conversation.id}&kind__eq=ActionEvent`, { key: user.key }),
    );
    expect(page.items.map((event) => event.tool_name)).toEqual(["file_editor", "file_editor", "terminal", "finish"]);
    expect(await json<number>(await call(`/api/v1/events/count?conversation_id__eq=${conversation.id}`, { key: user.key }))).toBe(
      events.length,
    );
  });
});

describe("agent control", () => {
  it("answers 409 for send-message and run when the sandbox is not RUNNING, and for run while running", async () => {
    const user = await createUser();
    const { llmModel } = await scriptModel([
      { delay_ms: 1500, tool_calls: [{ name: "think", arguments: { thought: "slow" } }] },
      { content: "done" },
    ]);
    const conversation = await readyConversation(user.key, { llm_model: llmModel });
    expect(
      (
        await call(`/api/v1/app-conversations/${conversation.id}/send-message`, {
          method: "POST",
          key: user.key,
          body: userMessage("go"),
        })
      ).status,
    ).toBe(200);
    await expectError(
      await call(`/api/v1/app-conversations/${conversation.id}/run`, { method: "POST", key: user.key }),
      409,
      "CONVERSATION_RUNNING",
    );
    await waitForExecution(user.key, conversation.id, ["finished"]);
    await call(`/api/v1/sandboxes/${conversation.sandbox_id}/pause`, { method: "POST", key: user.key });
    const refused = await expectError(
      await call(`/api/v1/app-conversations/${conversation.id}/send-message`, {
        method: "POST",
        key: user.key,
        body: userMessage("again"),
      }),
      409,
      "SANDBOX_NOT_RUNNING",
    );
    expect(refused.detail).toContain(`/api/v1/sandboxes/${conversation.sandbox_id}/resume`);
    await expectError(
      await call(`/api/v1/app-conversations/${conversation.id}/run`, { method: "POST", key: user.key }),
      409,
      "SANDBOX_NOT_RUNNING",
    );
    const stranger = await createUser();
    await expectError(
      await call(`/api/v1/app-conversations/${conversation.id}/run`, { method: "POST", key: stranger.key }),
      404,
      "CONVERSATION_NOT_FOUND",
    );
    await expectError(
      await call(`/api/v1/app-conversations/${conversation.id}/send-message`, {
        method: "POST",
        key: user.key,
        body: { content: [] },
      }),
      422,
      "VALIDATION_ERROR",
    );
  });
});
