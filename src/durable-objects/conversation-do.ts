import { DurableObject } from "cloudflare:workers";
import { AgentRunner } from "../agent/runner";
import { toValidationIssues } from "../api/app-env";
import { SocketMessageSchema } from "../api/schemas/conversations";
import { readConfig } from "../config";
import { type EventCursor, EventLog, type EventQuery, type EventSortOrder } from "../conversation/event-log";
import { errorFrame, LiveStreams, refusedSocket, SOCKET_CLOSE } from "../conversation/live-streams";
import { describeStartFailure, runStartStep, STEP_WORDS, type StepOutcome } from "../conversation/start-steps";
import type {
  ConversationEvent,
  ConversationRecord,
  SendMessage,
  StartPlan,
  StartTaskRecord,
  StartTaskStatus,
} from "../conversation/types";
import { ApiError, type ErrorBody } from "../errors";
import { requireRunningSandbox } from "../services/conversation-service";
import { PROXY_USER_HEADER } from "../services/proxy-headers";
import { applyMigrations } from "./migrations";

const MIGRATIONS = [
  `CREATE TABLE start_task (
     id TEXT PRIMARY KEY,
     user_id TEXT NOT NULL,
     status TEXT NOT NULL,
     detail TEXT,
     sandbox_id TEXT,
     app_conversation_id TEXT,
     plan_json TEXT NOT NULL,
     progress_json TEXT NOT NULL DEFAULT '{}',
     deadline INTEGER NOT NULL,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE TABLE conversation (
     id TEXT PRIMARY KEY,
     record_json TEXT NOT NULL
   );
   CREATE TABLE events (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     id TEXT NOT NULL UNIQUE,
     timestamp TEXT NOT NULL,
     source TEXT NOT NULL,
     kind TEXT NOT NULL,
     event_json TEXT NOT NULL
   );
   CREATE INDEX events_by_kind ON events (kind, seq);`,
  `ALTER TABLE events ADD COLUMN llm_json TEXT;
   CREATE INDEX events_by_time ON events (timestamp, seq);
   CREATE TABLE agent (
     id INTEGER PRIMARY KEY CHECK (id = 1),
     pause_requested INTEGER NOT NULL DEFAULT 0,
     iterations INTEGER NOT NULL DEFAULT 0,
     workdir TEXT,
     tasks_json TEXT NOT NULL DEFAULT '[]'
   );
   INSERT INTO agent (id) VALUES (1);
   CREATE TABLE tool_calls (
     tool_call_id TEXT PRIMARY KEY,
     action_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     name TEXT NOT NULL,
     input_json TEXT NOT NULL,
     state TEXT NOT NULL,
     signature TEXT
   );
   CREATE INDEX tool_calls_by_seq ON tool_calls (seq);
   CREATE TABLE file_history (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     path TEXT NOT NULL,
     content TEXT
   );`,
];

type TaskRow = {
  id: string;
  user_id: string;
  status: StartTaskStatus;
  detail: string | null;
  sandbox_id: string | null;
  app_conversation_id: string | null;
  plan_json: string;
  progress_json: string;
  deadline: number;
  created_at: string;
  updated_at: string;
};

/** What the start has done so far, kept between steps (a step driven again reads it). */
export interface StartProgress {
  workspace_dir?: string;
  branch?: string | null;
  setup_script?: { command: string; output: string; exit_code: number | null; timed_out: boolean } | null;
  hook_installed?: boolean;
}

const FINAL: readonly StartTaskStatus[] = ["READY", "ERROR"];
/** While a start is under way the alarm wakes this often to take over a drive lost to eviction. */
const WATCHDOG_MS = 2_000;
/** The same for a running agent. */
const AGENT_WATCHDOG_MS = 5_000;

/**
 * One object per conversation. It holds the conversation's start task (and drives the start),
 * the conversation's metadata once the start creates it, and its event log.
 *
 * The start is a chain of steps, each recorded before the next begins. The drive runs in the
 * background; the alarm is its watchdog: an object evicted mid-start is woken, drives again from
 * the step it was in (every step can run twice safely), and a start past its deadline ends in
 * ERROR. A start never stays in a non-final status.
 */
export class ConversationDO extends DurableObject<Env> {
  private driving = false;
  private readonly watchers = new Set<(task: StartTaskRecord) => void>();
  private eventLog: EventLog | null = null;
  private runnerInstance: AgentRunner | null = null;
  /** Set once the schema is in place, before any call is let in. */
  private live!: LiveStreams;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      applyMigrations(ctx.storage, MIGRATIONS);
      const config = readConfig(env);
      this.live = new LiveStreams(ctx, {
        heartbeatMs: config.eventStreamHeartbeatSeconds * 1000,
        clientBufferBytes: config.eventStreamClientBufferBytes,
      });
    });
    // Keep-alive pings on the event socket are answered without waking a hibernating object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
  }

  /** The event log; its ids carry the conversation id, known once the task or conversation is. */
  private get events(): EventLog {
    if (this.eventLog === null) {
      const id =
        this.getConversation()?.id ??
        (JSON.parse(this.taskRow()?.plan_json ?? '{"conversation_id":""}') as { conversation_id: string }).conversation_id;
      this.eventLog = new EventLog(this.ctx.storage.sql, id, () => this.live.appended());
    }
    return this.eventLog;
  }

  private get runner(): AgentRunner {
    if (this.runnerInstance === null) {
      const config = readConfig(this.env);
      this.runnerInstance = new AgentRunner({
        sql: this.ctx.storage.sql,
        storage: this.ctx.storage,
        env: this.env,
        events: this.events,
        conversation: () => this.getConversation(),
        saveConversation: (record) => this.saveConversation(record),
        maxIterations: config.agentMaxIterations,
        defaultModel: config.llmModel,
      });
    }
    return this.runnerInstance;
  }

  private saveConversation(record: ConversationRecord): void {
    this.ctx.storage.sql.exec("UPDATE conversation SET record_json = ?", JSON.stringify(record));
  }

  private taskRow(): TaskRow | null {
    return this.ctx.storage.sql.exec<TaskRow>("SELECT * FROM start_task").toArray()[0] ?? null;
  }

  private toTask(row: TaskRow): StartTaskRecord {
    const plan = JSON.parse(row.plan_json) as StartPlan;
    return {
      id: row.id,
      created_by_user_id: row.user_id,
      status: row.status,
      detail: row.detail,
      app_conversation_id: row.app_conversation_id,
      sandbox_id: row.sandbox_id,
      request: plan.request,
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }

  // ---- RPC surface -------------------------------------------------------------------------

  /** Records the start task (WORKING) and drives it in the background. Idempotent. */
  async start(plan: StartPlan, timeoutMs: number): Promise<StartTaskRecord> {
    const { task, created } = this.recordTask(plan, timeoutMs);
    if (created) await this.beginDrive();
    return task;
  }

  /**
   * Starts like `start`, and answers NDJSON: the task's snapshot now and at every status change,
   * ending after READY or ERROR.
   */
  async startAndWatch(plan: StartPlan, timeoutMs: number): Promise<ReadableStream<Uint8Array>> {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const writer = writable.getWriter();
    const encoder = new TextEncoder();
    const send = (task: StartTaskRecord) => {
      writer.write(encoder.encode(`${JSON.stringify(task)}\n`)).catch(() => this.watchers.delete(send));
      if (FINAL.includes(task.status)) {
        this.watchers.delete(send);
        writer.close().catch(() => undefined);
      }
    };
    const { task, created } = this.recordTask(plan, timeoutMs);
    // The first snapshot is sent and the watcher added before the drive can move the task.
    send(task);
    if (!FINAL.includes(task.status)) this.watchers.add(send);
    if (created) await this.beginDrive();
    return readable;
  }

  private recordTask(plan: StartPlan, timeoutMs: number): { task: StartTaskRecord; created: boolean } {
    const existing = this.taskRow();
    if (existing !== null) return { task: this.toTask(existing), created: false };
    this.ctx.storage.sql.exec(
      `INSERT INTO start_task (id, user_id, status, plan_json, deadline, created_at, updated_at)
       VALUES (?, ?, 'WORKING', ?, ?, ?, ?)`,
      plan.task_id,
      plan.user_id,
      JSON.stringify(plan),
      Date.now() + timeoutMs,
      plan.created_at,
      plan.created_at,
    );
    return { task: this.toTask(this.taskRow() as TaskRow), created: true };
  }

  private async beginDrive(): Promise<void> {
    await this.ctx.storage.setAlarm(Date.now() + WATCHDOG_MS);
    this.ctx.waitUntil(this.drive());
  }

  getStartTask(): StartTaskRecord | null {
    const row = this.taskRow();
    return row === null ? null : this.toTask(row);
  }

  getConversation(): ConversationRecord | null {
    const row = this.ctx.storage.sql.exec<{ record_json: string }>("SELECT record_json FROM conversation").toArray()[0];
    return row === undefined ? null : (JSON.parse(row.record_json) as ConversationRecord);
  }

  /** Renames the conversation; null when there is none. */
  rename(title: string): ConversationRecord | null {
    const record = this.getConversation();
    if (record === null) return null;
    const updated: ConversationRecord = { ...record, title, updated_at: new Date().toISOString() };
    this.ctx.storage.sql.exec("UPDATE conversation SET record_json = ?", JSON.stringify(updated));
    return updated;
  }

  /** Forgets the conversation, its start task and its events; a running agent stops at its next step. */
  async destroy(): Promise<void> {
    this.live.closeAll({ code: "CONVERSATION_NOT_FOUND", detail: "The conversation was deleted." });
    this.ctx.storage.transactionSync(() => {
      this.events.clear();
      for (const table of ["conversation", "start_task", "tool_calls", "file_history"]) {
        this.ctx.storage.sql.exec(`DELETE FROM ${table}`);
      }
      this.ctx.storage.sql.exec("UPDATE agent SET pause_requested = 0, iterations = 0, workdir = NULL, tasks_json = '[]'");
    });
    await this.ctx.storage.deleteAlarm();
  }

  // ---- the agent ---------------------------------------------------------------------------

  /** Adds a user message; with `run`, starts the agent (the caller checked the sandbox runs). */
  async sendMessage(message: SendMessage, run: boolean): Promise<{ ok: boolean }> {
    if (this.getConversation() === null) return { ok: false };
    this.events.append("user", "MessageEvent", { llm_message: { role: "user", content: message.content } });
    if (run) await this.startRun();
    return { ok: true };
  }

  /** Starts or continues the agent; `already_running` when it runs. */
  async run(): Promise<"started" | "already_running" | "not_found"> {
    const record = this.getConversation();
    if (record === null) return "not_found";
    if (record.execution_status === "running") return "already_running";
    await this.startRun();
    return "started";
  }

  /** Asks the agent to stop after the step it is in; nothing to do when it is not running. */
  pause(): "pausing" | "not_running" | "not_found" {
    const record = this.getConversation();
    if (record === null) return "not_found";
    if (record.execution_status !== "running") return "not_running";
    this.runner.requestPause();
    return "pausing";
  }

  private async startRun(): Promise<void> {
    this.runner.markRunning();
    await this.ctx.storage.setAlarm(Date.now() + AGENT_WATCHDOG_MS);
    this.ctx.waitUntil(this.runner.loop());
  }

  // Events cross RPC as JSON text: their fields vary by kind, and a string is the cheapest copy.

  /** The event log, oldest first, as a JSON array. */
  listEvents(): string {
    return JSON.stringify(this.getConversation() === null ? [] : this.events.all());
  }

  searchEvents(query: EventQuery, order: EventSortOrder, limit: number, after: EventCursor | null): string {
    return JSON.stringify(this.getConversation() === null ? [] : this.events.search(query, order, limit, after));
  }

  countEvents(query: EventQuery): number {
    return this.getConversation() === null ? 0 : this.events.count(query);
  }

  getEvents(seqs: number[]): string {
    return JSON.stringify(this.getConversation() === null ? [] : this.events.bySeq(seqs));
  }

  // ---- live streams --------------------------------------------------------------------------

  /** The full state a socket gets first: a ConversationStateUpdateEvent with key `full_state`. */
  private fullState(record: ConversationRecord): ConversationEvent {
    return {
      id: crypto.randomUUID(),
      timestamp: new Date().toISOString(),
      source: "environment",
      kind: "ConversationStateUpdateEvent",
      key: "full_state",
      value: { ...record, last_event_seq: this.live.lastSeq },
    };
  }

  /**
   * Where a stream starts: after `after` (a sequence number the caller checked is not negative),
   * or an answer saying why it cannot.
   */
  private streamStart(userId: string, after: number): { record: ConversationRecord } | { error: ErrorBody } {
    const record = this.getConversation();
    if (record === null || record.created_by_user_id !== userId) {
      return { error: { code: "CONVERSATION_NOT_FOUND", detail: "No conversation with this id." } };
    }
    const last = this.live.lastSeq;
    if (after > last) {
      const detail = `The last event id ${after} is past the end of this conversation's events (the last is ${last}).`;
      return { error: { code: "VALIDATION_ERROR", detail } };
    }
    return { record };
  }

  /** Server-Sent Events of the events after `after`, then live. */
  openEventStream(userId: string, after: number): { stream: ReadableStream<Uint8Array> } | { error: ErrorBody } {
    const start = this.streamStart(userId, after);
    if ("error" in start) return start;
    return { stream: this.live.openSse(after) };
  }

  /**
   * The event socket (a WebSocket upgrade the Worker authenticated): `?after=<seq>` replays the
   * history after it. A problem is told in an error frame, then the socket closes with its code.
   */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return new Response(null, { status: 426 });
    const userId = request.headers.get(PROXY_USER_HEADER) ?? "";
    const afterParam = new URL(request.url).searchParams.get("after");
    const after = afterParam === null ? null : Number(afterParam);
    const start = this.streamStart(userId, after ?? 0);
    if ("error" in start) {
      const code = start.error.code === "VALIDATION_ERROR" ? SOCKET_CLOSE.INVALID_REQUEST : SOCKET_CLOSE.NOT_FOUND;
      return refusedSocket(code, start.error);
    }
    const { 0: client, 1: server } = new WebSocketPair();
    this.live.acceptSocket(server, { user_id: userId }, this.fullState(start.record), after);
    return new Response(null, { status: 101, webSocket: client });
  }

  override async webSocketMessage(socket: WebSocket, message: string | ArrayBuffer): Promise<void> {
    const problem = await this.socketMessage(socket, message);
    if (problem === null) return;
    try {
      socket.send(errorFrame(problem));
      if (problem.code === "CONVERSATION_NOT_FOUND") socket.close(SOCKET_CLOSE.NOT_FOUND, problem.code);
    } catch {
      // The socket closed meanwhile.
    }
  }

  /** A client message is a user message, on the same path as `send-message`; null when taken. */
  private async socketMessage(socket: WebSocket, message: string | ArrayBuffer): Promise<ErrorBody | null> {
    if (typeof message !== "string") {
      return { code: "UNSUPPORTED_MEDIA_TYPE", detail: "Send messages as JSON text frames." };
    }
    const limit = readConfig(this.env).maxBodyBytes;
    if (message.length > limit) return { code: "PAYLOAD_TOO_LARGE", detail: `A message exceeds the limit of ${limit} bytes.` };
    let input: unknown;
    try {
      input = JSON.parse(message);
    } catch {
      return { code: "MALFORMED_JSON", detail: "The message is not valid JSON." };
    }
    const parsed = SocketMessageSchema.safeParse(input);
    if (!parsed.success) return { code: "VALIDATION_ERROR", detail: toValidationIssues("json", parsed.error.issues, input) };
    const { user_id } = socket.deserializeAttachment() as { user_id: string };
    const record = this.getConversation();
    if (record === null || record.created_by_user_id !== user_id) {
      return { code: "CONVERSATION_NOT_FOUND", detail: "No conversation with this id." };
    }
    try {
      await requireRunningSandbox(this.env, record);
      await this.sendMessage({ role: "user", content: parsed.data.content }, parsed.data.run ?? true);
      return null;
    } catch (error) {
      if (error instanceof ApiError) return error.toBody();
      console.error(
        JSON.stringify({ level: "error", msg: "socket message failed", conversation_id: record.id, error: String(error) }),
      );
      return { code: "INTERNAL_ERROR", detail: "The message could not be taken; try again." };
    }
  }

  override async webSocketClose(socket: WebSocket, code: number, reason: string): Promise<void> {
    try {
      socket.close(code === 1005 || code === 1006 ? 1000 : code, reason);
    } catch {
      // Already closed.
    }
  }

  override async alarm(): Promise<void> {
    const conversation = this.getConversation();
    if (conversation?.execution_status === "running") {
      // The watchdog of a run: a loop lost to an eviction is driven again from its checkpoint.
      if (!this.runner.isLooping) this.ctx.waitUntil(this.runner.loop());
      await this.ctx.storage.setAlarm(Date.now() + AGENT_WATCHDOG_MS);
      return;
    }
    const row = this.taskRow();
    if (row === null || FINAL.includes(row.status)) return;
    if (Date.now() >= row.deadline) {
      const minutes = Math.round((row.deadline - Date.parse(row.created_at)) / 60_000);
      this.finish(row.status, "ERROR", {
        detail: `The start did not finish within ${minutes} minute(s); it stopped while ${STEP_WORDS[row.status]}. Start the conversation again.`,
      });
      return;
    }
    if (!this.driving) this.ctx.waitUntil(this.drive());
    await this.ctx.storage.setAlarm(Math.min(row.deadline, Date.now() + WATCHDOG_MS));
  }

  // ---- the start -----------------------------------------------------------------------------

  /** Runs the steps from the current one until READY or ERROR. One drive per instance at a time. */
  private async drive(): Promise<void> {
    if (this.driving) return;
    this.driving = true;
    const config = readConfig(this.env);
    try {
      for (;;) {
        const row = this.taskRow();
        if (row === null || FINAL.includes(row.status) || Date.now() >= row.deadline) return;
        const plan = JSON.parse(row.plan_json) as StartPlan;
        const progress = JSON.parse(row.progress_json) as StartProgress;
        let outcome: StepOutcome;
        try {
          outcome = await runStartStep(this.env, config, row.status, plan, progress, row.sandbox_id, {
            taskCreatedAt: row.created_at,
            setSandbox: (id) => this.setSandbox(row.status, id),
            createConversation: (record) => this.createConversation(plan, record, progress),
          });
        } catch (error) {
          const detail = describeStartFailure(row.status, error);
          if (!detail.expected) {
            console.error(
              JSON.stringify({
                level: "error",
                msg: "start step failed",
                task_id: row.id,
                status: row.status,
                error: detail.logged,
              }),
            );
          }
          this.finish(row.status, "ERROR", { detail: detail.detail });
          return;
        }
        const moved = this.finish(row.status, outcome.next, {
          progress: { ...progress, ...outcome.progress },
          appConversationId: outcome.appConversationId,
        });
        if (!moved) return;
        // The first message asks the agent to run: it starts as the conversation becomes READY.
        if (outcome.next === "READY" && plan.initial_message?.run) await this.startRun();
      }
    } finally {
      this.driving = false;
    }
  }

  private setSandbox(from: StartTaskStatus, sandboxId: string): void {
    this.ctx.storage.sql.exec("UPDATE start_task SET sandbox_id = ? WHERE status = ?", sandboxId, from);
  }

  /**
   * Moves the task from `from` to `to`; false when it is no longer in `from` (a watchdog or a
   * second drive moved it). Each move is one snapshot for watchers.
   */
  private finish(
    from: StartTaskStatus,
    to: StartTaskStatus,
    change: { detail?: string; progress?: StartProgress; appConversationId?: string | undefined },
  ): boolean {
    const now = new Date().toISOString();
    const result = this.ctx.storage.sql.exec(
      `UPDATE start_task SET status = ?, detail = ?, updated_at = ?,
         progress_json = COALESCE(?, progress_json), app_conversation_id = COALESCE(?, app_conversation_id)
       WHERE status = ?`,
      to,
      change.detail ?? null,
      now,
      change.progress === undefined ? null : JSON.stringify(change.progress),
      change.appConversationId ?? null,
      from,
    );
    if (result.rowsWritten === 0) return false;
    const task = this.toTask(this.taskRow() as TaskRow);
    for (const watcher of [...this.watchers]) watcher(task);
    if (FINAL.includes(to)) this.ctx.waitUntil(this.ctx.storage.deleteAlarm());
    return true;
  }

  /** Writes the conversation and its first events, once (a second call finds it written). */
  private createConversation(plan: StartPlan, record: ConversationRecord, progress: StartProgress): ConversationRecord {
    const existing = this.getConversation();
    if (existing !== null) return existing;
    this.ctx.storage.transactionSync(() => {
      this.ctx.storage.sql.exec("INSERT INTO conversation (id, record_json) VALUES (?, ?)", record.id, JSON.stringify(record));
      const setup = progress.setup_script;
      if (setup) {
        this.events.append("environment", "ObservationEvent", {
          tool_name: "terminal",
          tool_call_id: null,
          action_id: null,
          observation: { kind: "SetupScriptObservation", ...setup },
        });
      }
      if (plan.initial_message !== null) {
        this.events.append("user", "MessageEvent", {
          llm_message: { role: plan.initial_message.role, content: plan.initial_message.content },
        });
      }
    });
    return record;
  }
}
