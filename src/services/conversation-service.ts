import type { StartRequest } from "../api/schemas/conversations";
import { normalizeId } from "../api/schemas/conversations";
import type { AppConfig } from "../config";
import { startTimeoutMs } from "../conversation/start-steps";
import type {
  ConversationRecord,
  ExecutionStatus,
  Metrics,
  SendMessage,
  StartPlan,
  StartTaskRecord,
} from "../conversation/types";
import type { ConversationFilter, ConversationIndexRow, ConversationOrder } from "../durable-objects/account-do";
import type { SandboxRecord, SandboxStatus } from "../durable-objects/sandbox-do";
import { ApiError } from "../errors";
import { newHexId, nowIso } from "./ids";
import { decodeCursor, encodeCursor, type Page } from "./paging";
import { deleteSandbox, requireOwnedSandbox, runtimeBaseUrl, sandboxOf } from "./sandbox-service";
import { accountOf } from "./user-service";

export interface StartTaskInfo extends StartTaskRecord {
  agent_server_url: string | null;
}

export interface AppConversation {
  id: string;
  created_by_user_id: string;
  sandbox_id: string;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: ConversationRecord["git_provider"];
  title: string;
  trigger: string | null;
  pr_number: number[];
  llm_model: string | null;
  agent_type: ConversationRecord["agent_type"];
  metrics: Metrics;
  parent_conversation_id: string | null;
  sub_conversation_ids: string[];
  created_at: string;
  updated_at: string;
  sandbox_status: SandboxStatus;
  execution_status: ExecutionStatus;
  conversation_url: string;
  session_api_key: string | null;
}

export function conversationOf(env: Env, id: string) {
  return env.CONVERSATION.getByName(id);
}

function notFound(): ApiError {
  return new ApiError("CONVERSATION_NOT_FOUND", "No conversation with this id.");
}

export function toStartTaskInfo(task: StartTaskRecord, origin: string): StartTaskInfo {
  return { ...task, agent_server_url: task.sandbox_id === null ? null : runtimeBaseUrl(origin, task.sandbox_id) };
}

function toAppConversation(
  record: ConversationRecord,
  sandbox: SandboxRecord | null,
  children: string[],
  origin: string,
): AppConversation {
  const running = sandbox?.status === "RUNNING";
  return {
    id: record.id,
    created_by_user_id: record.created_by_user_id,
    sandbox_id: record.sandbox_id,
    selected_repository: record.selected_repository,
    selected_branch: record.selected_branch,
    git_provider: record.git_provider,
    title: record.title,
    trigger: record.trigger,
    pr_number: record.pr_number,
    llm_model: record.llm_model,
    agent_type: record.agent_type,
    metrics: record.metrics,
    parent_conversation_id: record.parent_conversation_id,
    sub_conversation_ids: children,
    created_at: record.created_at,
    updated_at: record.updated_at,
    sandbox_status: sandbox?.status ?? "MISSING",
    execution_status: record.execution_status,
    conversation_url: `${origin}/api/v1/app-conversations/${record.id}`,
    session_api_key: running ? sandbox.session_api_key : null,
  };
}

/** A title from the first line of the first message's text, or a generic one. */
export function deriveTitle(message: SendMessage | null, conversationId: string): string {
  const text = message?.content.find((part) => part.type === "text")?.text ?? "";
  const line = text.trim().split("\n")[0]?.replace(/\s+/g, " ").trim() ?? "";
  if (line === "") return `Conversation ${conversationId.slice(0, 5)}`;
  return line.length <= 80 ? line : `${line.slice(0, 79)}…`;
}

/** The caller's conversation record, or a 404. */
export async function requireOwnedConversation(env: Env, userId: string, id: string): Promise<ConversationRecord> {
  const normalized = normalizeId(id);
  if (normalized === null) throw notFound();
  const [row] = await accountOf(env, userId).conversationRows([normalized]);
  if (row === undefined) throw notFound();
  const record = await conversationOf(env, normalized).getConversation();
  if (record === null || record.created_by_user_id !== userId) throw notFound();
  return record;
}

/**
 * Checks the request against what exists (sandbox, parent), fills in what a child inherits,
 * and hands the start to a new ConversationDO. Nothing is recorded when a check fails.
 */
async function planStart(env: Env, config: AppConfig, userId: string, request: StartRequest): Promise<StartPlan> {
  const parent =
    request.parent_conversation_id == null ? null : await requireOwnedConversation(env, userId, request.parent_conversation_id);
  const sandboxId = request.sandbox_id ?? parent?.sandbox_id ?? null;
  if (request.sandbox_id != null) await requireOwnedSandbox(env, userId, request.sandbox_id);
  const repository = request.selected_repository ?? parent?.selected_repository ?? null;
  const conversationId = newHexId();
  const message = request.initial_message ?? null;
  return {
    task_id: newHexId(),
    conversation_id: conversationId,
    user_id: userId,
    created_at: nowIso(),
    request,
    sandbox_id: sandboxId,
    new_sandbox_id: newHexId(),
    selected_repository: repository,
    selected_branch: request.selected_branch ?? (request.selected_repository == null ? (parent?.selected_branch ?? null) : null),
    git_provider: request.git_provider ?? (request.selected_repository == null ? (parent?.git_provider ?? null) : null),
    title: request.title?.trim() ?? deriveTitle(message, conversationId),
    trigger: request.trigger ?? null,
    pr_number: request.pr_number ?? [],
    llm_model: request.llm_model ?? (config.llmModel === "" ? null : config.llmModel),
    agent_type: request.agent_type ?? "default",
    parent_conversation_id: parent?.id ?? null,
    initial_message: message === null ? null : { role: "user", content: message.content, run: message.run },
  };
}

async function indexTask(env: Env, plan: StartPlan): Promise<void> {
  await accountOf(env, plan.user_id).indexStartTask({
    id: plan.task_id,
    conversation_id: plan.conversation_id,
    app_conversation_id: null,
    created_at: plan.created_at,
  });
}

export async function startConversation(
  env: Env,
  config: AppConfig,
  userId: string,
  request: StartRequest,
): Promise<StartTaskRecord> {
  const plan = await planStart(env, config, userId, request);
  const task = await conversationOf(env, plan.conversation_id).start(plan, startTimeoutMs(config));
  await indexTask(env, plan);
  return task;
}

/** Starts, and answers NDJSON task snapshots until READY or ERROR. */
export async function startConversationWatched(
  env: Env,
  config: AppConfig,
  userId: string,
  request: StartRequest,
): Promise<ReadableStream<Uint8Array>> {
  const plan = await planStart(env, config, userId, request);
  const stream = await conversationOf(env, plan.conversation_id).startAndWatch(plan, startTimeoutMs(config));
  await indexTask(env, plan);
  return stream;
}

/** Conversations for index rows, in row order; rows whose conversation is gone are repaired away. */
async function loadConversations(
  env: Env,
  userId: string,
  rows: ConversationIndexRow[],
  origin: string,
): Promise<Map<string, AppConversation>> {
  const account = accountOf(env, userId);
  const records = await Promise.all(rows.map((row) => conversationOf(env, row.id).getConversation()));
  const live = records.filter((record): record is ConversationRecord => record !== null && record.created_by_user_id === userId);
  const gone = rows.filter((row) => !live.some((record) => record.id === row.id));
  for (const row of gone) await account.removeConversation(row.id);
  const sandboxIds = [...new Set(live.map((record) => record.sandbox_id))];
  const sandboxes = await Promise.all(sandboxIds.map((id) => sandboxOf(env, id).get()));
  const sandboxById = new Map(sandboxIds.map((id, i) => [id, sandboxes[i] ?? null]));
  const children = new Map<string, string[]>();
  for (const child of await account.childConversations(live.map((record) => record.id))) {
    children.set(child.parent_id, [...(children.get(child.parent_id) ?? []), child.id]);
  }
  const result = new Map<string, AppConversation>();
  for (const record of live) {
    const sandbox = sandboxById.get(record.sandbox_id) ?? null;
    result.set(
      record.id,
      toAppConversation(record, sandbox?.user_id === userId ? sandbox : null, children.get(record.id) ?? [], origin),
    );
  }
  return result;
}

const SORTS: Record<string, ConversationOrder> = {
  CREATED_AT: { column: "created_at", descending: false },
  CREATED_AT_DESC: { column: "created_at", descending: true },
  UPDATED_AT: { column: "updated_at", descending: false },
  UPDATED_AT_DESC: { column: "updated_at", descending: true },
  TITLE: { column: "title", descending: false },
  TITLE_DESC: { column: "title", descending: true },
};

export async function searchConversations(
  env: Env,
  userId: string,
  filter: ConversationFilter,
  sortOrder: string,
  limit: number,
  pageId: string | undefined,
  origin: string,
): Promise<Page<AppConversation>> {
  const order = SORTS[sortOrder] ?? { column: "created_at", descending: true };
  const after = pageId === undefined ? null : (decodeCursor(pageId, ["string", "string"]) as [string, string]);
  const rows = await accountOf(env, userId).searchConversations(filter, order, limit + 1, after);
  const pageRows = rows.slice(0, limit);
  const loaded = await loadConversations(env, userId, pageRows, origin);
  const items = pageRows.flatMap((row) => loaded.get(row.id) ?? []);
  const last = pageRows.at(-1);
  return { items, next_page_id: rows.length > limit && last ? encodeCursor([last[order.column], last.id]) : null };
}

export function countConversations(env: Env, userId: string, filter: ConversationFilter): Promise<number> {
  return accountOf(env, userId).countConversations(filter);
}

/** In request order; null for ids that are malformed, unknown or not the caller's. */
export async function getConversations(
  env: Env,
  userId: string,
  ids: string[],
  origin: string,
): Promise<(AppConversation | null)[]> {
  const normalized = ids.map(normalizeId);
  const wanted = [...new Set(normalized.filter((id): id is string => id !== null))];
  const rows = await accountOf(env, userId).conversationRows(wanted);
  const loaded = await loadConversations(env, userId, rows, origin);
  return normalized.map((id) => (id === null ? null : (loaded.get(id) ?? null)));
}

export async function getConversation(env: Env, userId: string, id: string, origin: string): Promise<AppConversation> {
  const [conversation] = await getConversations(env, userId, [id], origin);
  if (!conversation) throw notFound();
  return conversation;
}

export async function renameConversation(
  env: Env,
  userId: string,
  id: string,
  title: string,
  origin: string,
): Promise<AppConversation> {
  const record = await requireOwnedConversation(env, userId, id);
  const renamed = await conversationOf(env, record.id).rename(title.trim());
  if (renamed === null) throw notFound();
  await accountOf(env, userId).indexConversation({
    id: renamed.id,
    title: renamed.title,
    sandbox_id: renamed.sandbox_id,
    parent_id: renamed.parent_conversation_id,
    created_at: renamed.created_at,
    updated_at: renamed.updated_at,
  });
  return getConversation(env, userId, renamed.id, origin);
}

/** Deletes the conversation and its events, and its sandbox unless another conversation uses it. */
export async function deleteConversation(env: Env, userId: string, id: string): Promise<void> {
  const record = await requireOwnedConversation(env, userId, id);
  await conversationOf(env, record.id).destroy();
  const { sandbox_id, sandbox_in_use } = await accountOf(env, userId).removeConversation(record.id);
  if (sandbox_id === null || sandbox_in_use) return;
  try {
    await deleteSandbox(env, userId, sandbox_id);
  } catch (error) {
    // Already gone (deleted by hand): nothing left to do.
    if (!(error instanceof ApiError && error.code === "SANDBOX_NOT_FOUND")) throw error;
  }
}

// ---- start tasks -----------------------------------------------------------------------------

export async function searchStartTasks(
  env: Env,
  userId: string,
  conversationId: string | undefined,
  createdAtGte: string | undefined,
  descending: boolean,
  limit: number,
  pageId: string | undefined,
  origin: string,
): Promise<Page<StartTaskInfo>> {
  const after = pageId === undefined ? null : (decodeCursor(pageId, ["string", "string"]) as [string, string]);
  const normalized = conversationId === undefined ? null : normalizeId(conversationId);
  const rows = await accountOf(env, userId).searchStartTasks(normalized, createdAtGte ?? null, descending, limit + 1, after);
  const pageRows = rows.slice(0, limit);
  const tasks = await Promise.all(pageRows.map((row) => conversationOf(env, row.conversation_id).getStartTask()));
  const items = tasks.flatMap((task) =>
    task !== null && task.created_by_user_id === userId ? [toStartTaskInfo(task, origin)] : [],
  );
  const last = pageRows.at(-1);
  return { items, next_page_id: rows.length > limit && last ? encodeCursor([last.created_at, last.id]) : null };
}

export function countStartTasks(
  env: Env,
  userId: string,
  conversationId: string | undefined,
  createdAtGte: string | undefined,
): Promise<number> {
  const normalized = conversationId === undefined ? null : normalizeId(conversationId);
  return accountOf(env, userId).countStartTasks(normalized, createdAtGte ?? null);
}

export async function getStartTasks(env: Env, userId: string, ids: string[], origin: string): Promise<(StartTaskInfo | null)[]> {
  const normalized = ids.map(normalizeId);
  const wanted = [...new Set(normalized.filter((id): id is string => id !== null))];
  const rows = await accountOf(env, userId).startTaskRows(wanted);
  const tasks = await Promise.all(rows.map((row) => conversationOf(env, row.conversation_id).getStartTask()));
  const byId = new Map<string, StartTaskInfo>();
  for (const task of tasks)
    if (task !== null && task.created_by_user_id === userId) byId.set(task.id, toStartTaskInfo(task, origin));
  return normalized.map((id) => (id === null ? null : (byId.get(id) ?? null)));
}

// ---- the agent -------------------------------------------------------------------------------

/** The conversation's sandbox, which must be RUNNING for the agent to work (else a 409). */
export async function requireRunningSandbox(env: Env, record: ConversationRecord): Promise<SandboxRecord> {
  const sandbox = await sandboxOf(env, record.sandbox_id).get();
  if (sandbox === null || sandbox.user_id !== record.created_by_user_id) {
    throw new ApiError(
      "SANDBOX_NOT_RUNNING",
      `The conversation's sandbox ${record.sandbox_id} no longer exists; start a new conversation.`,
    );
  }
  if (sandbox.status !== "RUNNING") {
    throw new ApiError(
      "SANDBOX_NOT_RUNNING",
      `The conversation's sandbox is ${sandbox.status}; resume it with POST /api/v1/sandboxes/${sandbox.id}/resume, then try again.`,
    );
  }
  return sandbox;
}

export async function sendMessage(
  env: Env,
  userId: string,
  id: string,
  message: SendMessage,
  run: boolean,
): Promise<{ success: true; sandbox_status: SandboxStatus }> {
  const record = await requireOwnedConversation(env, userId, id);
  const sandbox = await requireRunningSandbox(env, record);
  const result = await conversationOf(env, record.id).sendMessage(message, run);
  if (!result.ok) throw notFound();
  return { success: true, sandbox_status: sandbox.status };
}

export async function runConversation(env: Env, userId: string, id: string): Promise<void> {
  const record = await requireOwnedConversation(env, userId, id);
  await requireRunningSandbox(env, record);
  const result = await conversationOf(env, record.id).run();
  if (result === "not_found") throw notFound();
  if (result === "already_running")
    throw new ApiError("CONVERSATION_RUNNING", "The agent is already running; pause it first or wait for it to finish.");
}

export async function pauseConversation(env: Env, userId: string, id: string): Promise<void> {
  const record = await requireOwnedConversation(env, userId, id);
  if ((await conversationOf(env, record.id).pause()) === "not_found") throw notFound();
}
