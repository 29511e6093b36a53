import { env, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, createUser, expectError, json } from "../helpers/api";
import {
  getSandbox,
  hostState,
  killRuntime,
  runningSandbox,
  runtime,
  type SandboxInfo,
  startSandbox,
  waitForStatus,
} from "../helpers/sandboxes";

const BYTES = Uint8Array.from({ length: 70_000 }, (_, i) => (i * 7919 + (i >> 8)) % 256);

/** The sandbox's snapshot layers in R2 (their order is the SandboxDO's, not the listing's). */
async function snapshotObjects(id: string): Promise<{ key: string; size: number; kind: string | undefined }[]> {
  const listed = await env.WORKSPACES.list({ prefix: `workspaces/${id}/`, include: ["customMetadata"] });
  return listed.objects.map((object) => ({ key: object.key, size: object.size, kind: object.customMetadata?.kind }));
}

async function pauseAndResume(key: string, id: string): Promise<SandboxInfo> {
  expect((await call(`/api/v1/sandboxes/${id}/pause`, { method: "POST", key })).status).toBe(200);
  expect((await call(`/api/v1/sandboxes/${id}/resume`, { method: "POST", key })).status).toBe(200);
  return waitForStatus(key, id, ["RUNNING"]);
}

describe("POST /api/v1/sandboxes", () => {
  it("starts a sandbox from the default spec that reaches RUNNING with its key and URLs", async () => {
    const user = await createUser();
    const response = await startSandbox(user.key);
    expect(response.status).toBe(200);
    const started = await json<SandboxInfo>(response);
    expect(started).toMatchObject({
      status: "STARTING",
      sandbox_spec_id: "general",
      created_by_user_id: user.id,
      session_api_key: null,
      exposed_urls: null,
    });
    const info = await waitForStatus(user.key, started.id, ["RUNNING"]);
    expect(info.session_api_key).toMatch(/^sk_/);
    expect(info.exposed_urls?.map((url) => url.name)).toEqual(["AGENT_SERVER", "WORKER_1", "WORKER_2"]);
    expect(info.exposed_urls?.[0]?.url).toBe(`http://api.test/api/v1/sandboxes/${info.id}/runtime`);
    expect((await hostState(info.id)).running).toBe(true);
  });

  it("takes the spec from the query or the body, and 404s an unknown one", async () => {
    const user = await createUser();
    const fromQuery = await json<SandboxInfo>(await startSandbox(user.key, "slim"));
    expect(fromQuery.sandbox_spec_id).toBe("slim");
    const fromBody = await json<SandboxInfo>(
      await call("/api/v1/sandboxes", { method: "POST", key: user.key, body: { sandbox_spec_id: "general-large" } }),
    );
    expect(fromBody.sandbox_spec_id).toBe("general-large");
    await expectError(await startSandbox(user.key, "nope"), 404, "SANDBOX_SPEC_NOT_FOUND");
    expect(await json(await call("/api/v1/sandboxes/count", { key: user.key }))).toBe(2);
  });
});

describe("pause and resume", () => {
  it("keep the workspace byte for byte, with its mode, while the runtime's directory is deleted in between", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key);
    const written = await runtime(info, "/files?path=data/blob.bin&mode=0751", { method: "PUT", body: BYTES });
    expect(written.status).toBe(200);
    expect(await runtime(info, "/files?path=notes.txt", { method: "PUT", body: "hello\n" }).then((r) => r.status)).toBe(200);

    const paused = await call(`/api/v1/sandboxes/${info.id}/pause`, { method: "POST", key: user.key });
    expect(await json(paused)).toEqual({ success: true });
    const whilePaused = await getSandbox(user.key, info.id);
    expect(whilePaused).toMatchObject({ status: "PAUSED", session_api_key: null, exposed_urls: null });
    expect(await hostState(info.id)).toMatchObject({ running: false, directory_exists: false });
    expect((await snapshotObjects(info.id)).map((object) => object.kind)).toEqual(["full"]);
    await expectError(await runtime(info, "/files?path=notes.txt"), 409, "SANDBOX_NOT_RUNNING");

    expect((await call(`/api/v1/sandboxes/${info.id}/resume`, { method: "POST", key: user.key })).status).toBe(200);
    const resumed = await waitForStatus(user.key, info.id, ["RUNNING"]);
    expect((await hostState(info.id)).running).toBe(true);
    const read = await runtime(resumed, "/files?path=data/blob.bin");
    expect(read.status).toBe(200);
    expect(read.headers.get("X-File-Mode")).toBe("0751");
    expect(new Uint8Array(await read.arrayBuffer())).toEqual(BYTES);
    expect(await (await runtime(resumed, "/files?path=notes.txt")).text()).toBe("hello\n");
  });

  it("pause while a process keeps writing in the workspace, keep what it wrote, and stop that process", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key, "slim");
    // A log that takes tar a while to read, appended to all the while by a process in the
    // background of a finished command (it would go on for 20 s).
    const marker = `w${crypto.randomUUID().slice(0, 8)}`;
    const writer = await runtime(info, "/exec", {
      method: "POST",
      json: {
        command: `head -c 30000000 /dev/zero > app.log && (timeout 20 sh -c 'while :; do echo ${marker} >> app.log; done' > /dev/null 2>&1 &)`,
      },
    });
    expect(await json(writer)).toMatchObject({ exit_code: 0 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const resumed = await pauseAndResume(user.key, info.id);
    const stat = await json<{ size: number }>(await runtime(resumed, "/files/stat?path=app.log"));
    expect(stat.size).toBeGreaterThan(30_000_000);
    // The pause stopped the writer with the runtime, as a container's stop does ([w] keeps grep from finding itself).
    const pattern = `[${marker[0]}]${marker.slice(1)}`;
    const left = await runtime(resumed, "/exec", {
      method: "POST",
      json: { command: `grep -las '${pattern}' /proc/[0-9]*/cmdline | wc -l` },
    });
    expect((await json<{ stdout: string }>(left)).stdout.trim()).toBe("0");
  });

  it("upload only the changes on later pauses, and the layers restore every change, deletions included", async () => {
    const user = await createUser();
    let info = await runningSandbox(user.key, "slim");
    const put = async (path: string, body: BodyInit) =>
      expect((await runtime(info, `/files?path=${path}`, { method: "PUT", body })).status).toBe(200);
    await put("big.bin", BYTES);
    await put("keep.txt", "first\n");
    await put("gone.txt", "delete me\n");
    await put("dir/gone/inner.txt", "me too\n");
    info = await pauseAndResume(user.key, info.id);
    const [full] = await snapshotObjects(info.id);
    expect(full?.kind).toBe("full");

    await put("keep.txt", "second\n");
    await put("new/file.txt", "new\n");
    expect((await runtime(info, "/files?path=gone.txt", { method: "DELETE" })).status).toBe(200);
    expect((await runtime(info, "/files?path=dir/gone&recursive=true", { method: "DELETE" })).status).toBe(200);
    info = await pauseAndResume(user.key, info.id);
    const layers = await snapshotObjects(info.id);
    expect(layers).toHaveLength(2);
    const change = layers.find((layer) => layer.kind === "incremental");
    // The unchanged 70 kB file is not uploaded again.
    expect(change?.size).toBeLessThan(BYTES.length / 2);
    expect((await getSandbox(user.key, info.id))?.status).toBe("RUNNING");

    expect(new Uint8Array(await (await runtime(info, "/files?path=big.bin")).arrayBuffer())).toEqual(BYTES);
    expect(await (await runtime(info, "/files?path=keep.txt")).text()).toBe("second\n");
    expect(await (await runtime(info, "/files?path=new/file.txt")).text()).toBe("new\n");
    await expectError(await runtime(info, "/files/stat?path=gone.txt"), 404, "FILE_NOT_FOUND");
    await expectError(await runtime(info, "/files/stat?path=dir/gone"), 404, "FILE_NOT_FOUND");
    expect((await json<{ entries: unknown[] }>(await runtime(info, "/files/list?path=dir"))).entries).toEqual([]);
  });

  it("takes a full snapshot again once the changes weigh as much as it, and deletes the old layers", async () => {
    const user = await createUser();
    let info = await runningSandbox(user.key, "slim");
    expect((await runtime(info, "/files?path=small.txt", { method: "PUT", body: "small\n" })).status).toBe(200);
    info = await pauseAndResume(user.key, info.id);
    expect((await runtime(info, "/files?path=big.bin", { method: "PUT", body: BYTES })).status).toBe(200);
    info = await pauseAndResume(user.key, info.id);
    expect((await snapshotObjects(info.id)).map((object) => object.kind).sort()).toEqual(["full", "incremental"]);

    info = await pauseAndResume(user.key, info.id);
    const [only, ...rest] = await snapshotObjects(info.id);
    expect(rest).toEqual([]);
    expect(only?.kind).toBe("full");
    expect(only?.size).toBeGreaterThan(BYTES.length);
    expect(new Uint8Array(await (await runtime(info, "/files?path=big.bin")).arrayBuffer())).toEqual(BYTES);
    expect(await (await runtime(info, "/files?path=small.txt")).text()).toBe("small\n");
  });

  it("the runtime refuses a malformed baseline id", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key, "slim");
    await expectError(
      await runtime(info, "/archive?layer=true&baseline=not%20an%20id", { method: "PUT", body: new Uint8Array(1024) }),
      422,
      "VALIDATION_ERROR",
    );
  });

  it("are idempotent", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key);
    for (let i = 0; i < 2; i++)
      expect((await call(`/api/v1/sandboxes/${info.id}/pause`, { method: "POST", key: user.key })).status).toBe(200);
    expect((await getSandbox(user.key, info.id))?.status).toBe("PAUSED");
    for (let i = 0; i < 2; i++)
      expect((await call(`/api/v1/sandboxes/${info.id}/resume`, { method: "POST", key: user.key })).status).toBe(200);
    await waitForStatus(user.key, info.id, ["RUNNING"]);
    expect((await call(`/api/v1/sandboxes/${info.id}/resume`, { method: "POST", key: user.key })).status).toBe(200);
    expect((await getSandbox(user.key, info.id))?.status).toBe("RUNNING");
  });
});

describe("the runtime proxy", () => {
  it("refuses a wrong or missing session key, and the runtime itself refuses calls without its token", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key);
    await expectError(await runtime(info, "/files/list?path=.", { sessionKey: null }), 401, "AUTH_REQUIRED");
    await expectError(await runtime(info, "/files/list?path=.", { sessionKey: "sk_wrong" }), 401, "INVALID_API_KEY");
    expect((await runtime(info, "/files/list?path=.")).status).toBe(200);

    const direct = (await hostState(info.id)).url;
    const unauthenticated = await fetch(`${direct}/files/list?path=.`);
    expect(unauthenticated.status).toBe(401);
    const withSessionKey = await fetch(`${direct}/files/list?path=.`, {
      headers: { "X-Session-API-Key": info.session_api_key ?? "" },
    });
    expect(withSessionKey.status).toBe(401);
  });

  it("accepts the owner's API key, and 404s another user's", async () => {
    const owner = await createUser();
    const other = await createUser();
    const info = await runningSandbox(owner.key);
    expect((await call(`/api/v1/sandboxes/${info.id}/runtime/files/list?path=.`, { key: owner.key })).status).toBe(200);
    await expectError(
      await call(`/api/v1/sandboxes/${info.id}/runtime/files/list?path=.`, { key: other.key }),
      401,
      "INVALID_API_KEY",
    );
  });

  it("interrupts a shell command past its timeout and keeps the session usable", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key);
    expect((await runtime(info, "/sessions", { method: "POST", json: { id: "agent" } })).status).toBe(201);
    const setup = await json<{ exit_code: number }>(
      await runtime(info, "/sessions/agent/run", {
        method: "POST",
        json: { command: "mkdir -p w && cd w && export GREETING=hi" },
      }),
    );
    expect(setup.exit_code).toBe(0);
    const slow = await json<{ timed_out: boolean; exit_code: number }>(
      await runtime(info, "/sessions/agent/run", { method: "POST", json: { command: "sleep 30", timeout_ms: 300 } }),
    );
    expect(slow.timed_out).toBe(true);
    expect(slow.exit_code).not.toBe(0);
    const after = await json<{ output: string; exit_code: number }>(
      await runtime(info, "/sessions/agent/run", { method: "POST", json: { command: "echo $GREETING from $(basename $PWD)" } }),
    );
    expect(after).toMatchObject({ output: "hi from w\n", exit_code: 0 });
  });

  it("streams command output as it comes", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key);
    const response = await runtime(info, "/exec/stream", { method: "POST", json: { command: "echo one; echo two >&2; exit 4" } });
    const lines = (await response.text())
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; data?: string; exit_code?: number });
    expect(lines).toEqual([
      { type: "stdout", data: "one\n" },
      { type: "stderr", data: "two\n" },
      expect.objectContaining({ type: "exit", exit_code: 4 }),
    ]);
  });
});

describe("admission control", () => {
  it("answers the 6th concurrent start of a user with 429, and another user is unaffected", async () => {
    const user = await createUser();
    for (let i = 0; i < 5; i++) expect((await startSandbox(user.key, "slim")).status).toBe(200);
    await expectError(await startSandbox(user.key, "slim"), 429, "SANDBOX_LIMIT_REACHED");
    const other = await createUser();
    expect((await startSandbox(other.key, "slim")).status).toBe(200);
  });

  it("never lets 10 concurrent starts leave more than 5 running", async () => {
    const user = await createUser();
    const responses = await Promise.all(Array.from({ length: 10 }, () => startSandbox(user.key, "slim")));
    const statuses = responses.map((response) => response.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
    const active =
      (await json<number>(await call("/api/v1/sandboxes/count?status__eq=STARTING", { key: user.key }))) +
      (await json<number>(await call("/api/v1/sandboxes/count?status__eq=RUNNING", { key: user.key })));
    expect(active).toBe(5);
  });

  it("counts a resume against the limit, and a pause frees a place", async () => {
    const user = await createUser();
    const first = await runningSandbox(user.key, "slim");
    expect((await call(`/api/v1/sandboxes/${first.id}/pause`, { method: "POST", key: user.key })).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await startSandbox(user.key, "slim")).status).toBe(200);
    await expectError(
      await call(`/api/v1/sandboxes/${first.id}/resume`, { method: "POST", key: user.key }),
      429,
      "SANDBOX_LIMIT_REACHED",
    );
  });
});

describe("failures", () => {
  it("reports a runtime that dies as ERROR with a detail", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key, "slim");
    await killRuntime(info.id);
    await expectError(await runtime(info, "/files/list?path=."), 502, "UPSTREAM_ERROR");
    const failed = await waitForStatus(user.key, info.id, ["ERROR"]);
    expect(failed.status_detail).toMatch(/runtime/i);
    expect(failed.session_api_key).toBeNull();
  });

  it("notices a dead runtime from its alarm too", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key, "slim");
    await killRuntime(info.id);
    await runDurableObjectAlarm(env.SANDBOX.getByName(info.id));
    const failed = await waitForStatus(user.key, info.id, ["ERROR"]);
    expect(failed.status_detail).toMatch(/stopped answering/);
  });
});

describe("GET /api/v1/sandboxes/search", () => {
  it("pages newest first, filters by status, and agrees with count", async () => {
    const user = await createUser();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await json<SandboxInfo>(await startSandbox(user.key, "slim"))).id);
    const paused = await waitForStatus(user.key, ids[0] ?? "", ["RUNNING"]);
    await call(`/api/v1/sandboxes/${paused.id}/pause`, { method: "POST", key: user.key });

    const seen: string[] = [];
    let pageId: string | null = null;
    do {
      const query: string = pageId === null ? "limit=2" : `limit=2&page_id=${pageId}`;
      const page: { items: SandboxInfo[]; next_page_id: string | null } = await json(
        await call(`/api/v1/sandboxes/search?${query}`, { key: user.key }),
      );
      seen.push(...page.items.map((item) => item.id));
      pageId = page.next_page_id;
    } while (pageId !== null);
    expect(seen).toEqual([...ids].reverse());

    const pausedPage = await json<{ items: SandboxInfo[] }>(
      await call("/api/v1/sandboxes/search?status__eq=PAUSED", { key: user.key }),
    );
    expect(pausedPage.items.map((item) => item.id)).toEqual([paused.id]);
    expect(await json(await call("/api/v1/sandboxes/count?status__eq=PAUSED", { key: user.key }))).toBe(1);
    expect(await json(await call("/api/v1/sandboxes/count", { key: user.key }))).toBe(3);
    await expectError(await call("/api/v1/sandboxes/search?status__eq=SLEEPING", { key: user.key }), 422, "VALIDATION_ERROR");
  });
});

describe("unknown and other users' sandboxes", () => {
  it("are 404 on every route and null in batch get", async () => {
    const owner = await createUser();
    const other = await createUser();
    const info = await runningSandbox(owner.key, "slim");
    for (const id of [info.id, "0123456789abcdef0123456789abcdef"]) {
      await expectError(
        await call(`/api/v1/sandboxes/${id}/pause`, { method: "POST", key: other.key }),
        404,
        "SANDBOX_NOT_FOUND",
      );
      await expectError(
        await call(`/api/v1/sandboxes/${id}/resume`, { method: "POST", key: other.key }),
        404,
        "SANDBOX_NOT_FOUND",
      );
      await expectError(await call(`/api/v1/sandboxes/${id}`, { method: "DELETE", key: other.key }), 404, "SANDBOX_NOT_FOUND");
      expect(await json(await call(`/api/v1/sandboxes?id=${id}`, { key: other.key }))).toEqual([null]);
    }
    await expectError(
      await call("/api/v1/sandboxes/0123456789abcdef0123456789abcdef/runtime/health", { key: other.key }),
      404,
      "SANDBOX_NOT_FOUND",
    );
    expect((await getSandbox(owner.key, info.id))?.status).toBe("RUNNING");
  });
});

describe("DELETE /api/v1/sandboxes/{sandbox_id}", () => {
  it("removes the runtime, its directory and the snapshot; the sandbox is then unknown", async () => {
    const user = await createUser();
    const info = await runningSandbox(user.key, "slim");
    await call(`/api/v1/sandboxes/${info.id}/pause`, { method: "POST", key: user.key });
    await call(`/api/v1/sandboxes/${info.id}/resume`, { method: "POST", key: user.key });
    await waitForStatus(user.key, info.id, ["RUNNING"]);
    expect(await snapshotObjects(info.id)).toHaveLength(1);

    const deleted = await call(`/api/v1/sandboxes/${info.id}`, { method: "DELETE", key: user.key });
    expect(await json(deleted)).toEqual({ success: true });
    expect(await hostState(info.id)).toMatchObject({ running: false, directory_exists: false });
    expect(await snapshotObjects(info.id)).toEqual([]);
    expect(await getSandbox(user.key, info.id)).toBeNull();
    await expectError(await call(`/api/v1/sandboxes/${info.id}`, { method: "DELETE", key: user.key }), 404, "SANDBOX_NOT_FOUND");
    expect(await json(await call("/api/v1/sandboxes/count", { key: user.key }))).toBe(0);
  });
});

describe("authentication on sandbox routes", () => {
  it("is required even for an id that looks like a proxy path segment", async () => {
    await expectError(await call("/api/v1/sandboxes/runtime", { method: "DELETE" }), 401, "AUTH_REQUIRED");
    await expectError(await call("/api/v1/sandboxes/runtime/pause", { method: "POST" }), 401, "AUTH_REQUIRED");
  });
});
