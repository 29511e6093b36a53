import { env, evictAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call, createUser, json } from "../helpers/api";
import {
  conversationEvents,
  finishedTask,
  GIT_TOKEN,
  getConversation,
  getTask,
  readyConversation,
  type StartTask,
  sandboxShell,
  startConversation,
  storeToken,
} from "../helpers/conversations";
import { getSandbox, runningSandbox, startSandbox } from "../helpers/sandboxes";

function base64(text: string): string {
  return btoa(text);
}

describe("starting a conversation with a repository", () => {
  it("clones the branch, runs the setup script, installs the hook, and leaves no token behind", async () => {
    const user = await createUser();
    await storeToken(user.key);
    const conversation = await readyConversation(user.key, {
      selected_repository: "acme/widgets",
      selected_branch: "feature/login",
      initial_message: { content: [{ type: "text", text: "Add a login page\nwith tests" }] },
    });
    expect(conversation).toMatchObject({
      selected_repository: "acme/widgets",
      selected_branch: "feature/login",
      git_provider: "github",
      title: "Add a login page",
      sandbox_status: "RUNNING",
      execution_status: "idle",
    });
    expect(conversation.session_api_key).toMatch(/^sk_/);
    const sandbox = conversation.sandbox_id;

    const branch = await sandboxShell(user.key, sandbox, "git branch --show-current && cat LOGIN.md", "widgets");
    expect(branch.stdout).toBe("feature/login\nlogin feature\n");

    // The setup script ran in the working copy, and its output is kept for the conversation.
    expect((await sandboxShell(user.key, sandbox, "cat .setup-done", "widgets")).stdout).toBe("done\n");
    const events = await conversationEvents(conversation.id);
    expect(events.map((event) => event.kind)).toEqual(["ObservationEvent", "MessageEvent"]);
    expect(events[0]).toMatchObject({
      source: "environment",
      observation: { command: "bash .openhands/setup.sh", exit_code: 0, output: "setup ran in widgets on feature/login\n" },
    });

    // The pre-commit hook is installed and runs on commit.
    const commit = await sandboxShell(user.key, sandbox, "echo x > x.txt && git add x.txt && git commit -m test 2>&1", "widgets");
    expect(commit.exit_code).toBe(0);
    expect(commit.stdout).toContain("pre-commit hook ran");

    // The token is nowhere: not in .git/config, the environment, or any file of the workspace.
    const encoded = base64(`x-access-token:${GIT_TOKEN}`);
    expect((await sandboxShell(user.key, sandbox, "cat .git/config", "widgets")).stdout).not.toContain(GIT_TOKEN);
    const environment = await sandboxShell(user.key, sandbox, "env; cat /proc/$PPID/environ | tr '\\0' '\\n'");
    expect(environment.stdout).not.toContain(GIT_TOKEN);
    expect(environment.stdout).not.toContain(encoded);
    const grep = await sandboxShell(user.key, sandbox, `grep -rlaF -e '${GIT_TOKEN}' -e '${encoded}' . ; echo "exit=$?"`);
    expect(grep.stdout).toBe("exit=1\n");
    expect(JSON.stringify(events)).not.toContain(GIT_TOKEN);
  });

  it("creates a fresh work branch when no branch is selected", async () => {
    const user = await createUser();
    await storeToken(user.key);
    const conversation = await readyConversation(user.key, { selected_repository: "acme/plain" });
    expect(conversation.selected_branch).toBe(`agent/${conversation.id.slice(0, 8)}`);
    const branch = await sandboxShell(
      user.key,
      conversation.sandbox_id,
      "git branch --show-current && git log --oneline | wc -l",
      "plain",
    );
    expect(branch.stdout).toBe(`agent/${conversation.id.slice(0, 8)}\n1\n`);
    expect(await conversationEvents(conversation.id)).toEqual([]);
  });

  it("fails with a detail that says the clone was refused, without the token, for a wrong token", async () => {
    const user = await createUser();
    const wrong = `${GIT_TOKEN}-wrong`;
    await storeToken(user.key, wrong);
    const task = await finishedTask(user.key, (await startConversation(user.key, { selected_repository: "acme/widgets" })).id);
    expect(task.status).toBe("ERROR");
    expect(task.detail).toMatch(/refused to clone acme\/widgets/);
    expect(task.detail).toContain("PUT /api/v1/users/me/provider-tokens/github");
    expect(JSON.stringify(task)).not.toContain(wrong);
    expect(task.app_conversation_id).toBeNull();
  });

  it("says a token is needed when none is stored, and names a missing branch", async () => {
    const user = await createUser();
    const noToken = await finishedTask(user.key, (await startConversation(user.key, { selected_repository: "acme/widgets" })).id);
    expect(noToken).toMatchObject({ status: "ERROR" });
    expect(noToken.detail).toMatch(/no github token stored/);
    await storeToken(user.key);
    const noBranch = await finishedTask(
      user.key,
      (await startConversation(user.key, { selected_repository: "acme/widgets", selected_branch: "nope" })).id,
    );
    expect(noBranch.detail).toBe("The branch 'nope' does not exist in acme/widgets.");
  });

  it("streams every status in order as one JSON array", async () => {
    const user = await createUser();
    await storeToken(user.key, GIT_TOKEN, "gitlab");
    const response = await call("/api/v1/app-conversations/stream-start", {
      method: "POST",
      key: user.key,
      body: { selected_repository: "acme/widgets", git_provider: "gitlab" },
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const snapshots = JSON.parse(text) as StartTask[];
    expect(snapshots.map((task) => task.status)).toEqual([
      "WORKING",
      "WAITING_FOR_SANDBOX",
      "PREPARING_REPOSITORY",
      "RUNNING_SETUP_SCRIPT",
      "SETTING_UP_GIT_HOOKS",
      "STARTING_CONVERSATION",
      "READY",
    ]);
    const ready = snapshots.at(-1) as StartTask;
    expect(ready.app_conversation_id).toMatch(/^[0-9a-f]{32}$/);
    expect(ready.agent_server_url).toBe(`http://api.test/api/v1/sandboxes/${ready.sandbox_id}/runtime`);
    expect(new Set(snapshots.map((task) => task.id)).size).toBe(1);
    const conversation = await json<{ git_provider: string }>(
      await call(`/api/v1/app-conversations/${ready.app_conversation_id}`, { key: user.key }),
    );
    expect(conversation.git_provider).toBe("gitlab");
  });
});

describe("starting a conversation in a sandbox", () => {
  it("without a repository, makes the working directory a git repository", async () => {
    const user = await createUser();
    const conversation = await readyConversation(user.key, { title: "Scratch work" });
    expect(conversation).toMatchObject({ title: "Scratch work", selected_repository: null, git_provider: null });
    const status = await sandboxShell(user.key, conversation.sandbox_id, "git rev-parse --is-inside-work-tree");
    expect(status.stdout).toBe("true\n");
  });

  it("resumes a PAUSED sandbox_id and reaches READY in it, with the workspace kept", async () => {
    const user = await createUser();
    const sandbox = await runningSandbox(user.key);
    await sandboxShell(user.key, sandbox.id, "echo kept > notes.txt");
    expect((await call(`/api/v1/sandboxes/${sandbox.id}/pause`, { method: "POST", key: user.key })).status).toBe(200);
    expect((await getSandbox(user.key, sandbox.id))?.status).toBe("PAUSED");
    const conversation = await readyConversation(user.key, { sandbox_id: sandbox.id });
    expect(conversation).toMatchObject({ sandbox_id: sandbox.id, sandbox_status: "RUNNING" });
    expect((await sandboxShell(user.key, sandbox.id, "cat notes.txt")).stdout).toBe("kept\n");
  });

  it("ends in ERROR with the limit's reason when the user is at the sandbox limit", async () => {
    const user = await createUser();
    for (let i = 0; i < 5; i++) expect((await startSandbox(user.key)).status).toBe(200);
    const task = await finishedTask(user.key, (await startConversation(user.key)).id);
    expect(task.status).toBe("ERROR");
    expect(task.detail).toMatch(/already have 5 sandboxes running or starting/);
    expect(await json<number>(await call("/api/v1/sandboxes/count", { key: user.key }))).toBe(5);
  });

  it("resumes after the object is evicted mid-start and still reaches READY", async () => {
    const user = await createUser();
    await storeToken(user.key);
    const started = await startConversation(user.key, { selected_repository: "acme/slow" });
    const deadline = Date.now() + 20_000;
    while ((await getTask(user.key, started.id))?.status !== "RUNNING_SETUP_SCRIPT" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await evictAllDurableObjects();
    const task = await finishedTask(user.key, started.id);
    expect(task, task.detail ?? "").toMatchObject({ status: "READY" });
    const conversation = await getConversation(user.key, task.app_conversation_id ?? "");
    expect((await sandboxShell(user.key, conversation.sandbox_id, "cat .setup-runs", "slow")).stdout).toMatch(/^(run\n)+$/);
  });
});

describe("a child conversation", () => {
  it("inherits its parent's sandbox, repository and branch, and is listed by the parent", async () => {
    const user = await createUser();
    await storeToken(user.key);
    const parent = await readyConversation(user.key, { selected_repository: "acme/widgets", selected_branch: "feature/login" });
    const child = await readyConversation(user.key, {
      parent_conversation_id: parent.id,
      initial_message: { content: [{ type: "text", text: "Review the login page" }] },
    });
    expect(child).toMatchObject({
      parent_conversation_id: parent.id,
      sandbox_id: parent.sandbox_id,
      selected_repository: "acme/widgets",
      selected_branch: "feature/login",
      git_provider: "github",
    });
    expect((await getConversation(user.key, parent.id)).sub_conversation_ids).toEqual([child.id]);
    // The working copy was reused, not cloned again: the parent's setup marker is still the only one.
    expect((await sandboxShell(user.key, parent.sandbox_id, "ls -d .*widgets* widgets")).stdout).toBe("widgets\n");
  });
});

describe("a start past its deadline", () => {
  it("ends in ERROR with the step it stopped in, and a late step does not revive it", async () => {
    const user = await createUser();
    await storeToken(user.key);
    const started = await startConversation(user.key, { selected_repository: "acme/slow" });
    const [row] = await runInDurableObject(env.ACCOUNT.getByName(user.id), (_instance, state) =>
      state.storage.sql
        .exec<{ conversation_id: string }>("SELECT conversation_id FROM start_tasks WHERE id = ?", started.id)
        .toArray(),
    );
    const stub = env.CONVERSATION.getByName(row?.conversation_id ?? "");
    const deadline = Date.now() + 20_000;
    while ((await getTask(user.key, started.id))?.status !== "RUNNING_SETUP_SCRIPT" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec("UPDATE start_task SET deadline = ?", Date.now() - 1);
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const failed = await getTask(user.key, started.id);
    expect(failed?.status).toBe("ERROR");
    expect(failed?.detail).toMatch(/did not finish within \d+ minute\(s\); it stopped while running the setup script/);
    // The setup script finishes after 3 s; its step must not move the task on.
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    expect(await getTask(user.key, started.id)).toMatchObject({ status: "ERROR", app_conversation_id: null });
  });
});
