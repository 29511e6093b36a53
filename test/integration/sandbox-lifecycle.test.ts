import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { SANDBOX_SPECS } from "../../src/config/sandbox-specs";
import { PROXY_SESSION_KEY_HEADER } from "../../src/services/proxy-headers";
import { createUser, json } from "../helpers/api";
import { callWith } from "../helpers/configured";
import { getSandbox, hostState, runtime, type SandboxInfo, waitForStatus } from "../helpers/sandboxes";
import type { StandInContainerSandboxDO } from "../worker";

async function startWith(vars: Partial<Env>, key: string): Promise<SandboxInfo> {
  const response = await callWith(vars, "/api/v1/sandboxes?sandbox_spec_id=slim", {
    method: "POST",
    headers: { Authorization: `Bearer ${key}` },
  });
  expect(response.status).toBe(200);
  return json<SandboxInfo>(response);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("idle pause", () => {
  it("pauses an idle sandbox from its alarm and leaves a busy one running", async () => {
    const user = await createUser();
    const idle = await startWith({ SANDBOX_IDLE_TIMEOUT_SECONDS: "1" }, user.key);
    const busy = await startWith({ SANDBOX_IDLE_TIMEOUT_SECONDS: "1" }, user.key);
    await waitForStatus(user.key, idle.id, ["RUNNING"]);
    const busyInfo = await waitForStatus(user.key, busy.id, ["RUNNING"]);

    const until = Date.now() + 1300;
    while (Date.now() < until) {
      expect((await runtime(busyInfo, "/files/list?path=.")).status).toBe(200);
      await sleep(200);
    }
    await runDurableObjectAlarm(env.SANDBOX.getByName(idle.id));
    await runDurableObjectAlarm(env.SANDBOX.getByName(busy.id));

    const paused = await waitForStatus(user.key, idle.id, ["PAUSED"]);
    expect(paused.status_detail).toBe("Paused after being idle.");
    expect((await hostState(idle.id)).running).toBe(false);
    expect((await getSandbox(user.key, busy.id))?.status).toBe("RUNNING");
  });

  it("counts markActivity (a running agent) as activity", async () => {
    const user = await createUser();
    const info = await startWith({ SANDBOX_IDLE_TIMEOUT_SECONDS: "1" }, user.key);
    await waitForStatus(user.key, info.id, ["RUNNING"]);
    const stub = env.SANDBOX.getByName(info.id);
    const until = Date.now() + 1300;
    while (Date.now() < until) {
      await stub.markActivity();
      await sleep(200);
    }
    await runDurableObjectAlarm(stub);
    expect((await getSandbox(user.key, info.id))?.status).toBe("RUNNING");
  });
});

describe("start timeout", () => {
  it("turns a start that does not answer in time into ERROR with a detail", async () => {
    const user = await createUser();
    const info = await startWith({ SANDBOX_START_TIMEOUT_SECONDS: "0.001" }, user.key);
    const failed = await waitForStatus(user.key, info.id, ["ERROR"]);
    expect(failed.status_detail).toMatch(/did not answer its health check within/);
    expect(failed.session_api_key).toBeNull();
    // Nothing is left running.
    await sleep(300);
    expect((await hostState(info.id)).running).toBe(false);
  });
});

/** A sandbox in the stand-in container namespace, started and RUNNING. */
async function containerSandbox() {
  const user = await createUser();
  const spec = SANDBOX_SPECS.find((candidate) => candidate.id === "slim");
  if (spec === undefined) throw new Error("no slim spec");
  const id = `container-${crypto.randomUUID().slice(0, 8)}`;
  const stub = env.STANDIN_CONTAINER_SANDBOX.getByName(id);
  await env.ACCOUNT.getByName(user.id).admitSandbox(id, new Date().toISOString(), 5);
  await stub.create({
    id,
    user_id: user.id,
    spec,
    session_api_key: "sk_container",
    start_timeout_ms: 20_000,
    idle_timeout_ms: 600_000,
  });
  await untilRunning(stub);
  return { id, stub };
}

async function untilRunning(stub: DurableObjectStub<StandInContainerSandboxDO>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await stub.get())?.status !== "RUNNING" && Date.now() < deadline) await sleep(50);
  expect((await stub.get())?.status).toBe("RUNNING");
}

// As the Worker does: the SandboxDO checks the session key itself.
const asWorker = { [PROXY_SESSION_KEY_HEADER]: "sk_container" };

describe("the container backend (ctx.container stand-in reaching a real runtime)", () => {
  it("starts the spec's image and instance, proxies, pauses to R2 and resumes with the workspace", async () => {
    const { id, stub } = await containerSandbox();
    const starts = await stub.containerStarts();
    expect(starts).toEqual([
      expect.objectContaining({
        image: "registry.cloudflare.com/agent-sandbox:slim",
        instance: "basic",
        env: expect.objectContaining({ WORKDIR: "/workspace", LANG: "C.UTF-8" }),
      }),
    ]);

    const denied = await stub.fetch("http://sandbox/files/list?path=.", { headers: { [PROXY_SESSION_KEY_HEADER]: "sk_other" } });
    expect(denied.status).toBe(401);
    const put = await stub.fetch("http://sandbox/files?path=keep.sh&mode=0700", {
      method: "PUT",
      headers: asWorker,
      body: "#!/bin/sh\necho kept\n",
    });
    expect(put.status).toBe(200);
    expect((await stub.pause()).ok).toBe(true);
    expect(await hostState(id)).toMatchObject({ running: false, directory_exists: false });
    expect((await stub.resume(20_000)).ok).toBe(true);
    await untilRunning(stub);
    const ran = await stub.fetch("http://sandbox/exec", {
      method: "POST",
      headers: { ...asWorker, "Content-Type": "application/json" },
      body: JSON.stringify({ argv: ["./keep.sh"] }),
    });
    expect(await ran.json()).toMatchObject({ exit_code: 0, stdout: "kept\n" });
    expect(await runInDurableObject(stub, (instance) => instance.containerStarts().length)).toBe(2);
    expect((await stub.destroy()).ok).toBe(true);
    expect((await hostState(id)).directory_exists).toBe(false);
  });

  it("takes the snapshot again from a spooled archive when the streamed one breaks", async () => {
    const { id, stub } = await containerSandbox();
    const content = "x".repeat(200_000);
    const put = await stub.fetch("http://sandbox/files?path=big.txt", { method: "PUT", headers: asWorker, body: content });
    expect(put.status).toBe(200);
    await stub.breakNextArchive();
    expect((await stub.pause()).ok).toBe(true);
    expect(await stub.archiveRequests()).toEqual(["/archive?since=", "/archive?since=&spool=true"]);
    const objects = await env.WORKSPACES.list({ prefix: `workspaces/${id}/` });
    expect(objects.objects).toHaveLength(1);
    expect((await stub.resume(20_000)).ok).toBe(true);
    await untilRunning(stub);
    const read = await stub.fetch("http://sandbox/files?path=big.txt", { headers: asWorker });
    expect(await read.text()).toBe(content);
    expect((await stub.destroy()).ok).toBe(true);
  });
});
