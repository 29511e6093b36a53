import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { call, createUser, expectError, json, type TestUser } from "../helpers/api";
import { callWith } from "../helpers/configured";
import {
  type AppConversation,
  GIT_TOKEN,
  getConversation,
  readyConversation,
  type StartTask,
  startConversation,
  storeToken,
} from "../helpers/conversations";
import { getSandbox, runningSandbox, type SandboxInfo } from "../helpers/sandboxes";

type Page<T> = { items: T[]; next_page_id: string | null };

const ORDERS = ["CREATED_AT", "CREATED_AT_DESC", "UPDATED_AT", "UPDATED_AT_DESC", "TITLE", "TITLE_DESC"] as const;

async function page<T>(key: string, path: string): Promise<Page<T>> {
  const response = await call(path, { key });
  expect(response.status, path).toBe(200);
  return json<Page<T>>(response);
}

/** Every item of a search, following next_page_id, with `between` run after each page. */
async function allPages(key: string, query: string, between: () => Promise<void> = async () => {}): Promise<AppConversation[]> {
  const items: AppConversation[] = [];
  let pageId: string | null = null;
  do {
    const suffix: string = pageId === null ? "" : `&page_id=${pageId}`;
    const result: Page<AppConversation> = await page(key, `/api/v1/app-conversations/search?${query}${suffix}`);
    items.push(...result.items);
    pageId = result.next_page_id;
    await between();
  } while (pageId !== null);
  return items;
}

function sortKey(order: (typeof ORDERS)[number], c: AppConversation): string {
  if (order.startsWith("TITLE")) return `${c.title}\u0000${c.id}`;
  if (order.startsWith("UPDATED")) return `${c.updated_at}\u0000${c.id}`;
  return `${c.created_at}\u0000${c.id}`;
}

function expectOrdered(order: (typeof ORDERS)[number], items: AppConversation[]): void {
  const keys = items.map((item) => sortKey(order, item));
  const sorted = [...keys].sort();
  expect(keys).toEqual(order.endsWith("_DESC") ? sorted.reverse() : sorted);
}

describe("conversation search, count and batch get", () => {
  let owner: TestUser;
  let sandbox: SandboxInfo;
  const titles = ["delta", "alpha", "charlie", "echo", "bravo"];
  let conversations: AppConversation[] = [];
  let midpoint = "";

  beforeAll(async () => {
    owner = await createUser();
    sandbox = await runningSandbox(owner.key);
    for (const [i, title] of titles.entries()) {
      conversations.push(
        await readyConversation(owner.key, { sandbox_id: sandbox.id, title, trigger: "gui", pr_number: [i + 1] }),
      );
      if (i === 2) midpoint = new Date().toISOString();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Renaming touches updated_at, so that its order differs from created_at's.
    const renamed = await call(`/api/v1/app-conversations/${conversations[0]?.id}`, {
      method: "PATCH",
      key: owner.key,
      body: { title: "foxtrot" },
    });
    expect(renamed.status).toBe(200);
    conversations = await Promise.all(conversations.map((c) => getConversation(owner.key, c.id)));
  });

  it("returns the stored fields and the live sandbox fields", async () => {
    const [first] = conversations;
    expect(first).toMatchObject({
      title: "foxtrot",
      trigger: "gui",
      pr_number: [1],
      sandbox_id: sandbox.id,
      sandbox_status: "RUNNING",
      session_api_key: sandbox.session_api_key,
      execution_status: "idle",
      conversation_url: `http://api.test/api/v1/app-conversations/${first?.id}`,
      metrics: { accumulated_cost: 0, accumulated_token_usage: { prompt_tokens: 0, completion_tokens: 0 } },
    });
    expect((first?.updated_at ?? "") > (first?.created_at ?? "")).toBe(true);
  });

  it("pages each sort order with a small limit, each conversation once and in order, across inserts", async () => {
    for (const order of ORDERS) {
      const inserted: string[] = [];
      const items = await allPages(owner.key, `sort_order=${order}&limit=2`, async () => {
        if (inserted.length < 1) {
          inserted.push((await readyConversation(owner.key, { sandbox_id: sandbox.id, title: `zz-${order}` })).id);
        }
      });
      const ids = items.map((item) => item.id);
      expect(new Set(ids).size, order).toBe(ids.length);
      for (const c of conversations) expect(ids, order).toContain(c.id);
      expectOrdered(order, items);
      conversations.push(...(await Promise.all(inserted.map((id) => getConversation(owner.key, id)))));
    }
  });

  it("filters by title, times and sandbox, and count agrees with search", async () => {
    const filters: [string, (c: AppConversation) => boolean][] = [
      ["title__contains=AR", (c) => c.title.toLowerCase().includes("ar")],
      [`created_at__gte=${midpoint}`, (c) => c.created_at >= midpoint],
      [`created_at__lt=${midpoint}`, (c) => c.created_at < midpoint],
      [`updated_at__gte=${midpoint}`, (c) => c.updated_at >= midpoint],
      [`updated_at__lt=${midpoint}`, (c) => c.updated_at < midpoint],
      [`sandbox_id__eq=${sandbox.id}`, () => true],
      ["sandbox_id__eq=elsewhere", () => false],
      [`title__contains=a&created_at__lt=${midpoint}`, (c) => c.title.includes("a") && c.created_at < midpoint],
    ];
    for (const [query, predicate] of filters) {
      const expected = conversations
        .filter(predicate)
        .map((c) => c.id)
        .sort();
      const found = (await allPages(owner.key, `${query}&limit=3`)).map((c) => c.id);
      expect([...found].sort(), query).toEqual(expected);
      expect(await json<number>(await call(`/api/v1/app-conversations/count?${query}`, { key: owner.key })), query).toBe(
        expected.length,
      );
    }
  });

  it("lists without ids as a page and batch-gets with ids, null for unknown and other users' ids", async () => {
    const listed = await page<AppConversation>(owner.key, "/api/v1/app-conversations?limit=2");
    expect(listed.items).toHaveLength(2);
    expect(listed.next_page_id).not.toBeNull();
    const stranger = await createUser();
    const theirs = await readyConversation(stranger.key, { title: "theirs" });
    const [a, b] = conversations;
    const dashed = `${a?.id.slice(0, 8)}-${a?.id.slice(8, 12)}-${a?.id.slice(12, 16)}-${a?.id.slice(16, 20)}-${a?.id.slice(20)}`;
    const batch = await json<(AppConversation | null)[]>(
      await call(`/api/v1/app-conversations?ids=${b?.id}&ids=${theirs.id}&ids=${"0".repeat(32)}&ids=${dashed}&ids=nope`, {
        key: owner.key,
      }),
    );
    expect(batch.map((c) => c?.id ?? null)).toEqual([b?.id, null, null, a?.id, null]);
    const ids = Array.from({ length: 101 }, () => `ids=${"1".repeat(32)}`).join("&");
    await expectError(await call(`/api/v1/app-conversations?${ids}`, { key: owner.key }), 422, "VALIDATION_ERROR");

    // Another user's conversation is a 404 everywhere, and never in search or count.
    await expectError(await call(`/api/v1/app-conversations/${theirs.id}`, { key: owner.key }), 404, "CONVERSATION_NOT_FOUND");
    await expectError(
      await call(`/api/v1/app-conversations/${theirs.id}`, { method: "PATCH", key: owner.key, body: { title: "mine" } }),
      404,
      "CONVERSATION_NOT_FOUND",
    );
    await expectError(
      await call(`/api/v1/app-conversations/${theirs.id}`, { method: "DELETE", key: owner.key }),
      404,
      "CONVERSATION_NOT_FOUND",
    );
    const everything = await allPages(owner.key, "limit=100");
    expect(everything.map((c) => c.id)).not.toContain(theirs.id);
    expect((await getConversation(stranger.key, theirs.id)).title).toBe("theirs");
  });

  it("searches, counts and batch-gets start tasks", async () => {
    const first = conversations[1] as AppConversation;
    const byConversation = await page<StartTask>(
      owner.key,
      `/api/v1/app-conversations/start-tasks/search?conversation_id__eq=${first.id}`,
    );
    expect(byConversation.items.map((task) => task.app_conversation_id)).toEqual([first.id]);
    const task = byConversation.items[0] as StartTask;
    expect(task).toMatchObject({ status: "READY", sandbox_id: sandbox.id, request: { sandbox_id: sandbox.id, title: "alpha" } });
    const total = await json<number>(await call("/api/v1/app-conversations/start-tasks/count", { key: owner.key }));
    expect(total).toBe(conversations.length);
    for (const order of ["CREATED_AT", "CREATED_AT_DESC"]) {
      const seen: StartTask[] = [];
      let pageId: string | null = null;
      do {
        const suffix: string = pageId === null ? "" : `&page_id=${pageId}`;
        const result: Page<StartTask> = await page(
          owner.key,
          `/api/v1/app-conversations/start-tasks/search?limit=3&sort_order=${order}${suffix}`,
        );
        seen.push(...result.items);
        pageId = result.next_page_id;
      } while (pageId !== null);
      expect(seen).toHaveLength(total);
      const created = seen.map((t) => `${t.created_at}${t.id}`);
      const sorted = [...created].sort();
      expect(created).toEqual(order === "CREATED_AT" ? sorted : sorted.reverse());
    }
    const since = await json<number>(
      await call(`/api/v1/app-conversations/start-tasks/count?created_at__gte=${encodeURIComponent(midpoint)}`, {
        key: owner.key,
      }),
    );
    expect(since).toBe(conversations.filter((c) => c.created_at >= midpoint).length);
    const batch = await json<(StartTask | null)[]>(
      await call(`/api/v1/app-conversations/start-tasks?ids=${task.id}&ids=${"2".repeat(32)}`, { key: owner.key }),
    );
    expect(batch.map((t) => t?.id ?? null)).toEqual([task.id, null]);
    const stranger = await createUser();
    expect(
      await json<unknown[]>(await call(`/api/v1/app-conversations/start-tasks?ids=${task.id}`, { key: stranger.key })),
    ).toEqual([null]);
  });

  it("rejects malformed filters and cursors with a 422", async () => {
    for (const query of ["sort_order=NEWEST", "created_at__gte=yesterday", "limit=0", "page_id=%%%", "title__contains="]) {
      await expectError(await call(`/api/v1/app-conversations/search?${query}`, { key: owner.key }), 422, "VALIDATION_ERROR");
    }
  });
});

describe("renaming and deleting conversations", () => {
  it("renames, and rejects an empty title", async () => {
    const user = await createUser();
    const conversation = await readyConversation(user.key, {
      initial_message: { content: [{ type: "text", text: "  Fix the flaky test  " }] },
    });
    expect(conversation.title).toBe("Fix the flaky test");
    const renamed = await json<AppConversation>(
      await call(`/api/v1/app-conversations/${conversation.id}`, {
        method: "PATCH",
        key: user.key,
        body: { title: "Flaky test" },
      }),
    );
    expect(renamed.title).toBe("Flaky test");
    await expectError(
      await call(`/api/v1/app-conversations/${conversation.id}`, { method: "PATCH", key: user.key, body: { title: "  " } }),
      422,
      "VALIDATION_ERROR",
    );
    const found = await page<AppConversation>(user.key, "/api/v1/app-conversations/search?title__contains=flaky");
    expect(found.items.map((c) => c.title)).toEqual(["Flaky test"]);
  });

  it("deletes the sandbox with the last conversation that uses it, not before", async () => {
    const user = await createUser();
    const sandbox = await runningSandbox(user.key);
    const first = await readyConversation(user.key, { sandbox_id: sandbox.id });
    const second = await readyConversation(user.key, { sandbox_id: sandbox.id });
    expect((await call(`/api/v1/app-conversations/${first.id}`, { method: "DELETE", key: user.key })).status).toBe(200);
    await expectError(await call(`/api/v1/app-conversations/${first.id}`, { key: user.key }), 404, "CONVERSATION_NOT_FOUND");
    expect((await getSandbox(user.key, sandbox.id))?.status).toBe("RUNNING");
    expect((await call(`/api/v1/app-conversations/${second.id}`, { method: "DELETE", key: user.key })).status).toBe(200);
    expect(await getSandbox(user.key, sandbox.id)).toBeNull();
    expect(await json<number>(await call("/api/v1/app-conversations/count", { key: user.key }))).toBe(0);
    expect(await env.CONVERSATION.getByName(first.id).listEvents()).toBe("[]");
  });

  it("shows the sandbox as PAUSED without a session key once it is paused", async () => {
    const user = await createUser();
    const conversation = await readyConversation(user.key);
    await call(`/api/v1/sandboxes/${conversation.sandbox_id}/pause`, { method: "POST", key: user.key });
    const paused = await getConversation(user.key, conversation.id);
    expect(paused).toMatchObject({ sandbox_status: "PAUSED", session_api_key: null });
  });
});

describe("bad start requests leave nothing behind", () => {
  it("answers a clear 4xx and records no task", async () => {
    const user = await createUser();
    const stranger = await createUser();
    const theirSandbox = await runningSandbox(stranger.key);
    const cases: [unknown, number, string][] = [
      [{ sandbox_id: "no-such-sandbox" }, 404, "SANDBOX_NOT_FOUND"],
      [{ sandbox_id: theirSandbox.id }, 404, "SANDBOX_NOT_FOUND"],
      [{ parent_conversation_id: "3".repeat(32) }, 404, "CONVERSATION_NOT_FOUND"],
      [{ selected_repository: "not a repo" }, 422, "VALIDATION_ERROR"],
      [{ selected_repository: "../etc" }, 422, "VALIDATION_ERROR"],
      [{ selected_repository: "acme/widgets", selected_branch: "--upload-pack=evil" }, 422, "VALIDATION_ERROR"],
      [{ git_provider: "sourcehut" }, 422, "VALIDATION_ERROR"],
      [{ initial_message: { content: [] } }, 422, "VALIDATION_ERROR"],
      [{ initial_message: { content: [{ type: "text", text: "" }] } }, 422, "VALIDATION_ERROR"],
      [{ pr_number: ["one"] }, 422, "VALIDATION_ERROR"],
      [{ title: "t".repeat(2 * 1024 * 1024) }, 413, "PAYLOAD_TOO_LARGE"],
      [[1, 2], 422, "VALIDATION_ERROR"],
    ];
    for (const [body, status, code] of cases) {
      await expectError(await call("/api/v1/app-conversations", { method: "POST", key: user.key, body }), status, code);
    }
    await expectError(
      await call("/api/v1/app-conversations", {
        method: "POST",
        key: user.key,
        rawBody: "{",
        headers: { "Content-Type": "application/json" },
      }),
      400,
      "MALFORMED_JSON",
    );
    await expectError(await call("/api/v1/app-conversations", { method: "POST", body: {} }), 401, "AUTH_REQUIRED");
    expect(await json<number>(await call("/api/v1/app-conversations/start-tasks/count", { key: user.key }))).toBe(0);
    expect(await json<number>(await call("/api/v1/sandboxes/count", { key: user.key }))).toBe(0);
    const detail = await expectError(
      await call("/api/v1/app-conversations", { method: "POST", key: user.key, body: { git_provider: "sourcehut" } }),
      422,
      "VALIDATION_ERROR",
    );
    expect(detail.detail).toEqual([expect.objectContaining({ loc: ["body", "git_provider"] })]);
  });
});

describe("git provider tokens", () => {
  it("stores a token encrypted, never returns it, and deletes it", async () => {
    const user = await createUser();
    const put = await call("/api/v1/users/me/provider-tokens/github", {
      method: "PUT",
      key: user.key,
      body: { token: GIT_TOKEN },
    });
    expect(put.status).toBe(200);
    const text = await put.text();
    expect(text).not.toContain(GIT_TOKEN);
    expect(JSON.parse(text)).toMatchObject({ provider: "github" });
    const listed = await call("/api/v1/users/me/provider-tokens", { key: user.key });
    const listedText = await listed.text();
    expect(listedText).not.toContain(GIT_TOKEN);
    expect((JSON.parse(listedText) as { provider: string }[]).map((t) => t.provider)).toEqual(["github"]);

    const stored = await runInDurableObject(env.ACCOUNT.getByName(user.id), (_instance, state) =>
      state.storage.sql.exec<{ sealed: string }>("SELECT sealed FROM provider_tokens").toArray(),
    );
    expect(stored).toHaveLength(1);
    expect(stored[0]?.sealed).toMatch(/^v1\./);
    expect(stored[0]?.sealed).not.toContain(GIT_TOKEN);
    expect(stored[0]?.sealed).not.toContain(btoa(GIT_TOKEN).slice(0, 16));

    expect((await call("/api/v1/users/me/provider-tokens/github", { method: "DELETE", key: user.key })).status).toBe(200);
    await expectError(
      await call("/api/v1/users/me/provider-tokens/github", { method: "DELETE", key: user.key }),
      404,
      "PROVIDER_TOKEN_NOT_FOUND",
    );
    expect(await json(await call("/api/v1/users/me/provider-tokens", { key: user.key }))).toEqual([]);
  });

  it("rejects unknown providers and bad tokens, and is disabled without the key secret", async () => {
    const user = await createUser();
    const put = (provider: string, body: unknown) =>
      call(`/api/v1/users/me/provider-tokens/${provider}`, { method: "PUT", key: user.key, body });
    await expectError(await put("sourcehut", { token: "abc" }), 422, "VALIDATION_ERROR");
    await expectError(await put("github", { token: "" }), 422, "VALIDATION_ERROR");
    await expectError(await put("github", { token: "has space" }), 422, "VALIDATION_ERROR");
    await expectError(await put("github", {}), 422, "VALIDATION_ERROR");
    const disabled = await callWith({ PROVIDER_TOKEN_KEY: "" }, "/api/v1/users/me/provider-tokens/github", {
      method: "PUT",
      headers: { Authorization: `Bearer ${user.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ token: "abc" }),
    });
    await expectError(disabled, 503, "PROVIDER_TOKENS_DISABLED");
  });

  it("a token stored by one user is not used for another", async () => {
    const owner = await createUser();
    const other = await createUser();
    await storeToken(owner.key);
    const task = await startConversation(other.key, { selected_repository: "acme/widgets" });
    const deadline = Date.now() + 30_000;
    let status = task.status;
    let detail: string | null = null;
    while (!["READY", "ERROR"].includes(status) && Date.now() < deadline) {
      const [current] = await json<StartTask[]>(
        await call(`/api/v1/app-conversations/start-tasks?ids=${task.id}`, { key: other.key }),
      );
      status = current?.status ?? status;
      detail = current?.detail ?? null;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status).toBe("ERROR");
    expect(detail).toMatch(/no github token stored/);
  });
});
