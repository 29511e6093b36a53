import { env, evictDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, createUser, expectError, json } from "../helpers/api";
import { conversationEvents, readyConversation, scriptModel, userMessage, waitForExecution } from "../helpers/conversations";
import { type Frame, SocketClient, SseClient, seqOf } from "../helpers/streams";

const think = (thought: string, delay_ms = 0) => ({ tool_calls: [{ name: "think", arguments: { thought } }], delay_ms });
const finish = { tool_calls: [{ name: "finish", arguments: { message: "done" } }] };
const isFinished = (event: Frame) => event.kind === "ConversationStateUpdateEvent" && event.value === "finished";

const streamPath = (id: string) => `/api/v1/app-conversations/${id}/events/stream`;
const socketPath = (id: string, query = "") => `/api/v1/app-conversations/${id}/events/socket${query}`;

async function logIds(id: string): Promise<string[]> {
  return (await conversationEvents(id)).map((event) => String(event.id));
}

/** A conversation whose agent works slowly enough to be watched: six steps, 300 ms each. */
async function slowRun(key: string) {
  const steps = Array.from({ length: 6 }, (_, index) => think(`step ${index}`, 300));
  const { llmModel } = await scriptModel([...steps, finish]);
  return readyConversation(key, { llm_model: llmModel, initial_message: userMessage("work slowly") });
}

/** A finished conversation with a short history. */
async function finishedConversation(key: string) {
  const { llmModel } = await scriptModel([think("quick"), finish]);
  const conversation = await readyConversation(key, { llm_model: llmModel, initial_message: userMessage("be quick") });
  await waitForExecution(key, conversation.id, ["finished"]);
  return conversation;
}

describe("Server-Sent Events", () => {
  it("streams events while the agent runs, and a reconnect with Last-Event-ID gets each later event exactly once, in order", async () => {
    const user = await createUser();
    const conversation = await slowRun(user.key);
    const first = await SseClient.connect(streamPath(conversation.id), user.key);
    const firstAction = await first.waitFor((event) => event.kind === "ActionEvent");
    // Live: the agent is still at work when its first action arrives.
    expect(first.events.some(isFinished)).toBe(false);
    const seen = [...first.events];
    const lastId = first.lastId;
    expect(lastId).toBe(String(seqOf(seen.at(-1) as Frame)));
    expect(seqOf(seen.at(-1) as Frame)).toBeGreaterThanOrEqual(seqOf(firstAction));
    await first.close();

    const second = await SseClient.connect(streamPath(conversation.id), user.key, { "Last-Event-ID": String(lastId) });
    await second.waitFor(isFinished);
    expect((await waitForExecution(user.key, conversation.id, ["finished"])).execution_status).toBe("finished");
    const received = [...seen, ...second.events].map((event) => String(event.id));
    expect(received).toEqual(await logIds(conversation.id));
    // The SSE id is the event's sequence number.
    for (const frame of second.frames.filter((frame) => frame.data !== null)) {
      expect(frame.id).toBe(String(seqOf(frame.data as Frame)));
    }
    await second.close();
  });

  it("resumes from the last_event_id query parameter or a full event id; the header wins over the query", async () => {
    const user = await createUser();
    const conversation = await finishedConversation(user.key);
    const ids = await logIds(conversation.id);
    expect(ids.length).toBeGreaterThan(4);

    const byQuery = await SseClient.connect(`${streamPath(conversation.id)}?last_event_id=2`, user.key);
    await byQuery.waitFor((event) => event.id === ids.at(-1));
    expect(byQuery.events.map((event) => event.id)).toEqual(ids.slice(2));
    await byQuery.close();

    const byEventId = await SseClient.connect(`${streamPath(conversation.id)}?last_event_id=1`, user.key, {
      "Last-Event-ID": String(ids[3]),
    });
    await byEventId.waitFor((event) => event.id === ids.at(-1));
    expect(byEventId.events.map((event) => event.id)).toEqual(ids.slice(4));
    await byEventId.close();
  });

  it("keeps an idle stream alive with heartbeat comments", async () => {
    const user = await createUser();
    const conversation = await finishedConversation(user.key);
    const sse = await SseClient.connect(streamPath(conversation.id), user.key);
    const deadline = Date.now() + 5_000;
    while (!sse.frames.some((frame) => frame.comment === "heartbeat") && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(sse.frames.some((frame) => frame.comment === "heartbeat")).toBe(true);
    await sse.close();
  });

  it("accepts the key as session_api_key; refuses bad keys, other users, unknown ids and bad positions", async () => {
    const owner = await createUser();
    const other = await createUser();
    const conversation = await finishedConversation(owner.key);
    const byQueryKey = await SseClient.connect(`${streamPath(conversation.id)}?session_api_key=${owner.key}`, null);
    await byQueryKey.waitFor(isFinished);
    await byQueryKey.close();

    await expectError(await call(streamPath(conversation.id)), 401, "AUTH_REQUIRED");
    await expectError(await call(`${streamPath(conversation.id)}?session_api_key=sk-nope`), 401, "INVALID_API_KEY");
    await expectError(await call(streamPath(conversation.id), { key: other.key }), 404, "CONVERSATION_NOT_FOUND");
    await expectError(await call(streamPath("0".repeat(32)), { key: owner.key }), 404, "CONVERSATION_NOT_FOUND");
    await expectError(await call(streamPath("not-an-id"), { key: owner.key }), 422, "VALIDATION_ERROR");
    const bad = await expectError(
      await call(streamPath(conversation.id), { key: owner.key, headers: { "Last-Event-ID": "abc" } }),
      422,
      "VALIDATION_ERROR",
    );
    expect(bad.detail).toEqual([expect.objectContaining({ loc: ["header", "Last-Event-ID"] })]);
    const otherConversation = `${"1".repeat(32)}-3`;
    await expectError(
      await call(`${streamPath(conversation.id)}?last_event_id=${otherConversation}`, { key: owner.key }),
      422,
      "VALIDATION_ERROR",
    );
    const pastEnd = await expectError(
      await call(streamPath(conversation.id), { key: owner.key, headers: { "Last-Event-ID": "100000" } }),
      422,
      "VALIDATION_ERROR",
    );
    expect(JSON.stringify(pastEnd.detail)).toContain("past the end");
  });

  it("cuts off a client that stops reading, without slowing the others; it resumes from its last id and misses nothing", async () => {
    const user = await createUser();
    const conversation = await finishedConversation(user.key);
    const before = (await logIds(conversation.id)).length;
    const reading = await SseClient.connect(streamPath(conversation.id), user.key);
    // Level with the log, then it stops reading: everything written to it from now on stays unread.
    const stalled = await SseClient.connect(streamPath(conversation.id), user.key);
    await stalled.waitFor((event) => event.id === `${conversation.id}-${before}`);
    stalled.pause();
    const big = "x".repeat(40_000);
    for (let index = 0; index < 12; index += 1) {
      const response = await call(`/api/v1/app-conversations/${conversation.id}/send-message`, {
        method: "POST",
        key: user.key,
        body: userMessage(`${index} ${big}`, false),
      });
      expect(response.status).toBe(200);
    }
    const ids = await logIds(conversation.id);
    expect(ids).toHaveLength(before + 12);
    await reading.waitFor((event) => event.id === ids.at(-1));
    expect(reading.events.map((event) => event.id)).toEqual(ids);

    // The stalled client reads again: it gets what was written before the cut, then the end.
    stalled.resume();
    await stalled.waitForEnd();
    const got = stalled.events.map((event) => String(event.id));
    expect(got.length).toBeLessThan(ids.length);
    expect(got).toEqual(ids.slice(0, got.length));
    const resumed = await SseClient.connect(streamPath(conversation.id), user.key, { "Last-Event-ID": String(stalled.lastId) });
    await resumed.waitFor((event) => event.id === ids.at(-1));
    expect([...got, ...resumed.events.map((event) => String(event.id))]).toEqual(ids);
    await resumed.close();
    await reading.close();
  });
});

describe("the event socket", () => {
  it("sends the full state, the history with resend_all, then live events; a reconnect with after misses and repeats nothing", async () => {
    const user = await createUser();
    const conversation = await slowRun(user.key);
    const first = await SocketClient.connect(socketPath(conversation.id, "?resend_all=true"), user.key);
    const state = await first.waitFor(() => true);
    expect(state).toMatchObject({
      kind: "ConversationStateUpdateEvent",
      key: "full_state",
      source: "environment",
      value: { id: conversation.id, title: conversation.title },
    });
    const action = await first.waitFor((frame) => frame.kind === "ActionEvent");
    expect(first.events.some(isFinished)).toBe(false);
    first.close();

    const second = await SocketClient.connect(socketPath(conversation.id, `?after=${String(action.id)}`), user.key);
    await second.waitFor(isFinished);
    expect(second.frames[0]).toMatchObject({ key: "full_state" });
    const firstPart = first.events.slice(0, first.events.indexOf(action) + 1);
    const received = [...firstPart, ...second.events].map((frame) => String(frame.id));
    expect(received).toEqual(await logIds(conversation.id));
    second.close();
  });

  it("without resend_all sends only the state and then new events", async () => {
    const user = await createUser();
    const conversation = await finishedConversation(user.key);
    const client = await SocketClient.connect(socketPath(conversation.id), user.key);
    await client.waitFor(() => true);
    const response = await call(`/api/v1/app-conversations/${conversation.id}/send-message`, {
      method: "POST",
      key: user.key,
      body: userMessage("just a note", false),
    });
    expect(response.status).toBe(200);
    const note = await client.waitFor((frame) => frame.kind === "MessageEvent");
    expect(client.frames.map((frame) => frame.kind)).toEqual(["ConversationStateUpdateEvent", "MessageEvent"]);
    expect(note.id).toBe((await logIds(conversation.id)).at(-1));
    client.close();
  });

  it("survives the object's hibernation and still receives the next event", async () => {
    const user = await createUser();
    const conversation = await finishedConversation(user.key);
    const client = await SocketClient.connect(socketPath(conversation.id), user.key);
    await client.waitFor(() => true);
    // The object leaves memory; the runtime keeps the socket.
    await evictDurableObject(env.CONVERSATION.getByName(conversation.id));
    client.send("ping");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(client.raw).toContain("pong");
    const response = await call(`/api/v1/app-conversations/${conversation.id}/send-message`, {
      method: "POST",
      key: user.key,
      body: userMessage("after hibernation", false),
    });
    expect(response.status).toBe(200);
    const note = await client.waitFor((frame) => frame.kind === "MessageEvent");
    expect(JSON.stringify(note)).toContain("after hibernation");
    expect(client.closed).toBeNull();
    client.close();
  });

  it("takes a user message sent over the socket and runs the agent on it", async () => {
    const user = await createUser();
    const { llmModel } = await scriptModel([finish]);
    const conversation = await readyConversation(user.key, { llm_model: llmModel });
    const client = await SocketClient.connect(socketPath(conversation.id), user.key);
    await client.waitFor(() => true);
    client.send({ role: "user", content: "please finish" });
    const message = await client.waitFor((frame) => frame.kind === "MessageEvent" && frame.source === "user");
    expect(message.llm_message).toEqual({ role: "user", content: [{ type: "text", text: "please finish" }] });
    await client.waitFor(isFinished);
    expect(client.frames.some((frame) => frame.kind === "ActionEvent" && frame.tool_name === "finish")).toBe(true);
    client.close();
  });

  it("answers a malformed or invalid frame with an error frame and keeps the socket open", async () => {
    const user = await createUser();
    const conversation = await finishedConversation(user.key);
    const client = await SocketClient.connect(socketPath(conversation.id), user.key);
    await client.waitFor(() => true);
    client.send("{not json");
    expect(await client.waitFor((frame) => frame.code !== undefined)).toMatchObject({ code: "MALFORMED_JSON" });
    client.send({ role: "assistant", content: 3 });
    const invalid = await client.waitFor((frame) => frame.code === "VALIDATION_ERROR");
    expect(invalid.detail).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ loc: ["body", "role"] }),
        expect.objectContaining({ loc: ["body", "content"] }),
      ]),
    );
    client.send({ role: "user", content: "   " });
    await client.waitFor((frame) => frame.code === "VALIDATION_ERROR" && frame !== invalid);
    expect(client.closed).toBeNull();
    // Still open and still served.
    client.send({ role: "user", content: "a valid note", run: false });
    await client.waitFor((frame) => frame.kind === "MessageEvent" && JSON.stringify(frame).includes("a valid note"));
    client.close();
  });

  it("closes with 4001 on bad credentials, 4004 on unknown or other users' conversations, 4022 on bad parameters", async () => {
    const owner = await createUser();
    const other = await createUser();
    const conversation = await finishedConversation(owner.key);

    const noKey = await SocketClient.connect(socketPath(conversation.id), null);
    expect(await noKey.waitForClose()).toMatchObject({ code: 4001 });
    expect(noKey.frames[0]).toMatchObject({ code: "AUTH_REQUIRED" });
    const badKey = await SocketClient.connect(socketPath(conversation.id, "?session_api_key=sk-wrong"), null);
    expect(await badKey.waitForClose()).toMatchObject({ code: 4001 });
    expect(badKey.frames[0]).toMatchObject({ code: "INVALID_API_KEY" });

    for (const id of [conversation.id, "0".repeat(32), "nope"]) {
      const client = await SocketClient.connect(socketPath(id), id === conversation.id ? other.key : owner.key);
      expect(await client.waitForClose()).toMatchObject({ code: 4004 });
      expect(client.frames[0]).toMatchObject({ code: "CONVERSATION_NOT_FOUND" });
    }
    for (const query of ["?after=abc", "?after=100000", "?resend_all=yes"]) {
      const client = await SocketClient.connect(socketPath(conversation.id, query), owner.key);
      expect(await client.waitForClose()).toMatchObject({ code: 4022 });
      expect(client.frames[0]).toMatchObject({ code: "VALIDATION_ERROR" });
    }

    // The key as a query parameter works; a plain GET is told to upgrade.
    const byQuery = await SocketClient.connect(socketPath(conversation.id, `?session_api_key=${owner.key}`), null);
    expect(await byQuery.waitFor(() => true)).toMatchObject({ key: "full_state" });
    byQuery.close();
    await expectError(await call(socketPath(conversation.id), { key: owner.key }), 426, "UPGRADE_REQUIRED");
  });

  it("closes sockets with 4004 when the conversation is deleted", async () => {
    const user = await createUser();
    const conversation = await finishedConversation(user.key);
    const client = await SocketClient.connect(socketPath(conversation.id), user.key);
    await client.waitFor(() => true);
    const response = await call(`/api/v1/app-conversations/${conversation.id}`, { method: "DELETE", key: user.key });
    expect(response.status).toBe(200);
    expect(await client.waitForClose()).toMatchObject({ code: 4004 });
    expect(client.frames.at(-1)).toMatchObject({ code: "CONVERSATION_NOT_FOUND" });
    expect(await json(response)).toEqual({ success: true });
  });
});
