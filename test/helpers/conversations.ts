import { env } from "cloudflare:test";
import { expect } from "vitest";
import { call, json } from "./api";

export const GIT_TOKEN = env.TEST_GIT_TOKEN;

export interface StartTask {
  id: string;
  created_by_user_id: string;
  status: string;
  detail: string | null;
  app_conversation_id: string | null;
  sandbox_id: string | null;
  agent_server_url: string | null;
  request: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

export interface AppConversation {
  id: string;
  created_by_user_id: string;
  sandbox_id: string;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: string | null;
  title: string;
  trigger: string | null;
  pr_number: number[];
  llm_model: string | null;
  metrics: { accumulated_cost: number; accumulated_token_usage: Record<string, number> };
  parent_conversation_id: string | null;
  sub_conversation_ids: string[];
  created_at: string;
  updated_at: string;
  sandbox_status: string;
  execution_status: string;
  conversation_url: string;
  session_api_key: string | null;
}

export async function storeToken(key: string, token = GIT_TOKEN, provider = "github"): Promise<void> {
  const response = await call(`/api/v1/users/me/provider-tokens/${provider}`, { method: "PUT", key, body: { token } });
  expect(response.status).toBe(200);
}

export async function startConversation(key: string, body: Record<string, unknown> = {}): Promise<StartTask> {
  const response = await call("/api/v1/app-conversations", { method: "POST", key, body });
  expect(response.status).toBe(200);
  return json<StartTask>(response);
}

export async function getTask(key: string, id: string): Promise<StartTask | null> {
  const response = await call(`/api/v1/app-conversations/start-tasks?ids=${id}`, { key });
  expect(response.status).toBe(200);
  const [task] = await json<(StartTask | null)[]>(response);
  return task ?? null;
}

/** Polls the start task until READY or ERROR. */
export async function finishedTask(key: string, id: string, timeoutMs = 40_000): Promise<StartTask> {
  const deadline = Date.now() + timeoutMs;
  let last: StartTask | null = null;
  while (Date.now() < deadline) {
    last = await getTask(key, id);
    if (last?.status === "READY" || last?.status === "ERROR") return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`start task ${id} did not finish: ${JSON.stringify(last)}`);
}

/** Starts a conversation, expects READY, and answers the conversation. */
export async function readyConversation(key: string, body: Record<string, unknown> = {}): Promise<AppConversation> {
  const task = await finishedTask(key, (await startConversation(key, body)).id);
  expect(task, task.detail ?? "").toMatchObject({ status: "READY" });
  return getConversation(key, task.app_conversation_id ?? "");
}

export async function getConversation(key: string, id: string): Promise<AppConversation> {
  const response = await call(`/api/v1/app-conversations/${id}`, { key });
  expect(response.status).toBe(200);
  return json<AppConversation>(response);
}

export interface ExecResult {
  exit_code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a shell command in the sandbox through the runtime proxy, as its owner. */
export async function sandboxShell(key: string, sandboxId: string, command: string, cwd = "."): Promise<ExecResult> {
  const response = await call(`/api/v1/sandboxes/${sandboxId}/runtime/exec`, { method: "POST", key, body: { command, cwd } });
  expect(response.status).toBe(200);
  return json<ExecResult>(response);
}

/** The conversation's event log, read from its object (the event routes arrive with the agent). */
export async function conversationEvents(id: string): Promise<Record<string, unknown>[]> {
  return JSON.parse(await env.CONVERSATION.getByName(id).listEvents()) as Record<string, unknown>[];
}

export interface ScriptTurn {
  status?: number;
  retry_after?: string;
  content?: string;
  tool_calls?: { name: string; arguments: Record<string, unknown> }[];
  usage?: { prompt_tokens: number; completion_tokens: number };
  delay_ms?: number;
}

let scripts = 0;

/** Registers a scripted model on the fake server; answers the `llm_model` that plays it. */
export async function scriptModel(turns: ScriptTurn[], repeatLast = false): Promise<{ llmModel: string; name: string }> {
  const name = `script-${++scripts}-${crypto.randomUUID().slice(0, 8)}`;
  const response = await fetch(`${env.FAKE_LLM_URL}/scripts/${name}`, {
    method: "PUT",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ turns, repeat_last: repeatLast }),
  });
  expect(response.status).toBe(200);
  return { llmModel: `openai/${name}`, name };
}

export async function modelRequests(name: string): Promise<{ headers: Record<string, string>; body: { messages: unknown[] } }[]> {
  return (await (await fetch(`${env.FAKE_LLM_URL}/scripts/${name}/requests`)).json()) as {
    headers: Record<string, string>;
    body: { messages: unknown[] };
  }[];
}

/** Polls the conversation until its execution_status is one of `statuses`. */
export async function waitForExecution(
  key: string,
  id: string,
  statuses: string[],
  timeoutMs = 30_000,
): Promise<AppConversation> {
  const deadline = Date.now() + timeoutMs;
  let last: AppConversation | null = null;
  while (Date.now() < deadline) {
    last = await getConversation(key, id);
    if (statuses.includes(last.execution_status)) return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`conversation ${id} did not reach ${statuses.join("/")}: ${last?.execution_status}`);
}

export function userMessage(text: string, run = true) {
  return { content: [{ type: "text", text }], run };
}
