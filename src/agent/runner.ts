import type { ImagePart, ModelMessage, TextPart, ToolCallPart, ToolSet } from "ai";
import type { EventLog } from "../conversation/event-log";
import type { ConversationRecord, ExecutionStatus, Metrics, TokenUsage } from "../conversation/types";
import { RuntimeCallError, RuntimeClient } from "../sandbox/runtime-client";
import { createLlmProvider, LlmError, type LlmTurn } from "./llm";
import { systemPrompt } from "./prompt";
import { agentTools, isReadOnlyCall, runTool, type ToolOutcome, type TrackedTask } from "./tools";

/** While the agent waits on the model, its sandbox hears of it at least this often. */
const MAX_ACTIVITY_INTERVAL_MS = 30_000;
/** How many identical (action, result) pairs in a row make the agent `stuck`. */
export const STUCK_REPEATS = 4;

type ToolCallRow = {
  tool_call_id: string;
  action_id: string;
  seq: number;
  name: string;
  input_json: string;
  state: "pending" | "running" | "done";
  signature: string | null;
};

type AgentRow = { pause_requested: number; iterations: number; workdir: string | null; tasks_json: string };

/** What the runner needs from the object that owns it. */
export interface RunnerHost {
  readonly sql: SqlStorage;
  readonly storage: DurableObjectStorage;
  readonly env: Env;
  readonly events: EventLog;
  conversation(): ConversationRecord | null;
  saveConversation(record: ConversationRecord): void;
  maxIterations: number;
  defaultModel: string;
}

/**
 * The agent loop of one conversation. Each step is a checkpoint in SQLite: a model turn is
 * recorded (its message, its actions and their pending tool calls) in one transaction; a tool
 * call is marked running before it runs and done, with its observation, in one transaction
 * after. A loop driven again after an eviction continues from there: it never runs a completed
 * tool call twice, and a call interrupted mid-run is run again only when it has no effects.
 */
export class AgentRunner {
  private looping = false;
  /** When this instance last marked the sandbox active for a model call. */
  private activityMarkedAt = 0;
  /** How often the sandbox must hear of a model call: a third of its idle timeout, at most 30 s. */
  private activityIntervalMs: number | null = null;

  constructor(private readonly host: RunnerHost) {}

  get isLooping(): boolean {
    return this.looping;
  }

  private agent(): AgentRow {
    return this.host.sql.exec<AgentRow>("SELECT pause_requested, iterations, workdir, tasks_json FROM agent").one();
  }

  /** Sets the execution status, with its ConversationStateUpdateEvent when it changes. */
  setStatus(status: ExecutionStatus): void {
    const record = this.host.conversation();
    if (record === null || record.execution_status === status) return;
    this.host.storage.transactionSync(() => {
      this.host.saveConversation({ ...record, execution_status: status, updated_at: new Date().toISOString() });
      this.host.events.append("environment", "ConversationStateUpdateEvent", { key: "execution_status", value: status });
    });
  }

  private fail(status: "error" | "stuck" | "paused", code: string, detail: string): void {
    this.host.storage.transactionSync(() => {
      this.host.events.append("environment", "ConversationErrorEvent", { code, detail });
      this.setStatus(status);
    });
  }

  requestPause(): void {
    this.host.sql.exec("UPDATE agent SET pause_requested = 1");
  }

  /** Marks the agent running (the caller checked it may run) and clears a pending pause. */
  markRunning(): void {
    this.host.sql.exec("UPDATE agent SET pause_requested = 0");
    this.setStatus("running");
  }

  /** Drives the loop until it stops; one loop per instance at a time. */
  async loop(): Promise<void> {
    if (this.looping) return;
    this.looping = true;
    try {
      while (await this.step()) {
        // Each step is its own checkpoint.
      }
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      console.error(
        JSON.stringify({ level: "error", msg: "agent step failed", error: error instanceof Error ? error.stack : detail }),
      );
      this.fail(
        "error",
        "AGENT_ERROR",
        `The agent stopped on an unexpected error: ${detail.slice(0, 300)}. Run it again to continue.`,
      );
    } finally {
      this.looping = false;
    }
  }

  /** One step: a pending tool call, else a model turn. False when the loop should stop. */
  private async step(): Promise<boolean> {
    const record = this.host.conversation();
    if (record === null || record.execution_status !== "running") return false;
    const agent = this.agent();
    if (agent.pause_requested) {
      this.host.storage.transactionSync(() => {
        this.host.sql.exec("UPDATE agent SET pause_requested = 0");
        this.host.events.append("user", "PauseEvent", {});
        this.setStatus("paused");
      });
      return false;
    }
    const runtime = new RuntimeClient(this.host.env, record.sandbox_id, record.created_by_user_id);
    const pending = this.host.sql
      .exec<ToolCallRow>("SELECT * FROM tool_calls WHERE state != 'done' ORDER BY seq LIMIT 1")
      .toArray()[0];
    if (pending !== undefined) return this.runToolCall(record, runtime, pending);
    if (agent.iterations >= this.host.maxIterations) {
      this.fail(
        "error",
        "MAX_ITERATIONS_REACHED",
        `The agent reached its limit of ${this.host.maxIterations} steps without finishing. Send a message to continue.`,
      );
      return false;
    }
    return this.modelTurn(record, runtime);
  }

  private async workdir(runtime: RuntimeClient, record: ConversationRecord): Promise<string> {
    const known = this.agent().workdir;
    if (known !== null) return known;
    const health = await runtime.json<{ workdir: string }>("GET", "/health");
    const workdir = record.workspace_dir === "." ? health.workdir : `${health.workdir}/${record.workspace_dir}`;
    this.host.sql.exec("UPDATE agent SET workdir = ?", workdir);
    return workdir;
  }

  private async modelTurn(record: ConversationRecord, runtime: RuntimeClient): Promise<boolean> {
    const model = record.llm_model ?? this.host.defaultModel;
    if (model === "") {
      this.fail(
        "error",
        "LLM_NOT_CONFIGURED",
        "No model is configured: set llm_model on the conversation or LLM_MODEL on the deployment.",
      );
      return false;
    }
    let workdir: string;
    try {
      workdir = await this.workdir(runtime, record);
    } catch (error) {
      return this.sandboxFailure(error);
    }
    const system = systemPrompt(record, workdir);
    const tools: ToolSet = agentTools(record.agent_type);
    if (this.host.sql.exec("SELECT 1 FROM events WHERE kind = 'SystemPromptEvent' LIMIT 1").toArray().length === 0) {
      this.host.events.append("agent", "SystemPromptEvent", { system_prompt: system, tools: Object.keys(tools) });
    }
    // Tool calls mark the sandbox active as they pass through it. A model call marks it here, at
    // most once per interval (a fast loop need not pay a call to the sandbox per turn), and
    // again every interval while it lasts, so that idle pause never cuts a run.
    const sandbox = this.host.env.SANDBOX.getByName(record.sandbox_id);
    const markActive = () => {
      this.activityMarkedAt = Date.now();
      return sandbox.markActivity().catch(() => null);
    };
    if (this.activityIntervalMs === null) {
      const answer = await markActive();
      this.activityIntervalMs = Math.min(MAX_ACTIVITY_INTERVAL_MS, (answer?.idle_timeout_ms ?? Number.POSITIVE_INFINITY) / 3);
    } else if (Date.now() - this.activityMarkedAt >= this.activityIntervalMs) {
      void markActive();
    }
    const keepAlive = setInterval(() => void markActive(), this.activityIntervalMs);
    let turn: LlmTurn;
    try {
      turn = await createLlmProvider(model, this.host.env).complete({
        system,
        messages: this.messages(),
        tools,
      });
    } catch (error) {
      if (error instanceof LlmError) {
        this.fail("error", error.code, error.detail);
        return false;
      }
      throw error;
    } finally {
      clearInterval(keepAlive);
    }
    const current = this.host.conversation();
    if (current === null || current.execution_status !== "running") return false;
    const responseId = crypto.randomUUID();
    this.host.storage.transactionSync(() => {
      this.host.sql.exec("UPDATE agent SET iterations = iterations + 1");
      this.host.saveConversation({
        ...current,
        metrics: addUsage(current.metrics, turn.usage),
        updated_at: new Date().toISOString(),
      });
      // With actions, the text is their `thought`; without, it is the agent's message.
      if (turn.toolCalls.length === 0) {
        this.host.events.append("agent", "MessageEvent", {
          llm_message: { role: "assistant", content: [{ type: "text", text: turn.text }] },
          llm_response_id: responseId,
        });
      }
      for (const call of turn.toolCalls) {
        const action = this.host.events.append("agent", "ActionEvent", {
          thought: turn.text,
          tool_name: call.name,
          tool_call_id: call.id,
          action: call.input,
          llm_response_id: responseId,
        });
        this.host.sql.exec(
          "INSERT INTO tool_calls (tool_call_id, action_id, seq, name, input_json, state) VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM tool_calls), ?, ?, 'pending')",
          call.id,
          action.id,
          call.name,
          JSON.stringify(call.input ?? {}),
        );
      }
      // A reply without actions hands the turn back to the user.
      if (turn.toolCalls.length === 0) this.setStatus("finished");
    });
    return turn.toolCalls.length > 0;
  }

  private async runToolCall(record: ConversationRecord, runtime: RuntimeClient, call: ToolCallRow): Promise<boolean> {
    const input = JSON.parse(call.input_json) as unknown;
    let outcome: ToolOutcome;
    if (call.state === "running" && !isReadOnlyCall(call.name, input)) {
      // Interrupted mid-run (the object was evicted): its effects are unknown, so say so
      // rather than run it a second time.
      outcome = {
        observation: { error: "interrupted" },
        text: "This tool call was interrupted by a restart of the agent before its result was recorded; it may or may not have taken effect. Check its effects before repeating it.",
        error: true,
      };
    } else {
      this.host.sql.exec("UPDATE tool_calls SET state = 'running' WHERE tool_call_id = ?", call.tool_call_id);
      try {
        // The tool's calls go through the SandboxDO's proxy, which records them as activity.
        outcome = await runTool(call.name, input, {
          runtime,
          workdir: await this.workdir(runtime, record),
          agentType: record.agent_type,
          history: {
            push: (path, content) => this.host.sql.exec("INSERT INTO file_history (path, content) VALUES (?, ?)", path, content),
            pop: (path) => this.popHistory(path),
          },
          tasks: {
            get: () => JSON.parse(this.agent().tasks_json) as TrackedTask[],
            set: (tasks) => this.host.sql.exec("UPDATE agent SET tasks_json = ?", JSON.stringify(tasks)),
          },
        });
      } catch (error) {
        this.host.sql.exec("UPDATE tool_calls SET state = 'pending' WHERE tool_call_id = ?", call.tool_call_id);
        return this.sandboxFailure(error);
      }
    }
    const signature = `${call.name}\u0000${call.input_json}\u0000${outcome.text}`;
    this.host.storage.transactionSync(() => {
      this.host.events.append(
        "environment",
        outcome.error ? "AgentErrorEvent" : "ObservationEvent",
        {
          tool_name: call.name,
          tool_call_id: call.tool_call_id,
          action_id: call.action_id,
          ...(outcome.error ? { error: outcome.text } : { observation: outcome.observation }),
        },
        { text: outcome.text },
      );
      this.host.sql.exec(
        "UPDATE tool_calls SET state = 'done', signature = ? WHERE tool_call_id = ?",
        signature,
        call.tool_call_id,
      );
      if (outcome.finished !== undefined) this.setStatus("finished");
    });
    if (outcome.finished !== undefined) return false;
    const recent = this.host.sql
      .exec<{ signature: string | null }>(
        "SELECT signature FROM tool_calls WHERE state = 'done' ORDER BY seq DESC LIMIT ?",
        STUCK_REPEATS,
      )
      .toArray();
    if (recent.length === STUCK_REPEATS && recent.every((row) => row.signature === signature)) {
      this.fail(
        "stuck",
        "AGENT_STUCK",
        `The agent repeated the same ${call.name} call with the same result ${STUCK_REPEATS} times in a row. Send a message with guidance to continue.`,
      );
      return false;
    }
    return true;
  }

  private popHistory(path: string): string | null | undefined {
    const row = this.host.sql
      .exec<{ seq: number; content: string | null }>(
        "SELECT seq, content FROM file_history WHERE path = ? ORDER BY seq DESC LIMIT 1",
        path,
      )
      .toArray()[0];
    if (row === undefined) return undefined;
    this.host.sql.exec("DELETE FROM file_history WHERE seq = ?", row.seq);
    return row.content;
  }

  /** The sandbox stopped answering: stop in a clear state; `run` continues once it is back. */
  private sandboxFailure(error: unknown): boolean {
    if (error instanceof RuntimeCallError && error.status === 409) {
      this.fail(
        "paused",
        "SANDBOX_NOT_RUNNING",
        `${error.message} The agent is paused: resume the sandbox, then run the conversation.`,
      );
      return false;
    }
    if (error instanceof RuntimeCallError) {
      this.fail("error", "SANDBOX_UNAVAILABLE", `${error.message} Resume the sandbox, then run the conversation to continue.`);
      return false;
    }
    throw error;
  }

  /** The conversation as the model sees it: user messages, its own turns, and tool results. */
  private messages(): ModelMessage[] {
    const history = this.host.events.history();
    const results = new Map<string, { toolName: string; text: string }>();
    for (const { event, llm } of history) {
      if ((event.kind === "ObservationEvent" || event.kind === "AgentErrorEvent") && typeof event.tool_call_id === "string") {
        results.set(event.tool_call_id, {
          toolName: String(event.tool_name),
          text: (llm as { text?: string } | undefined)?.text ?? "",
        });
      }
    }
    const messages: ModelMessage[] = [];
    let assistant: { id: string; parts: (TextPart | ToolCallPart)[]; calls: string[] } | null = null;
    const flush = () => {
      if (assistant === null) return;
      messages.push({ role: "assistant", content: assistant.parts });
      const toolResults = assistant.calls.flatMap((id) => {
        const result = results.get(id);
        return result === undefined
          ? []
          : [
              {
                type: "tool-result" as const,
                toolCallId: id,
                toolName: result.toolName,
                output: { type: "text" as const, value: result.text },
              },
            ];
      });
      if (toolResults.length > 0) messages.push({ role: "tool", content: toolResults });
      assistant = null;
    };
    for (const { event } of history) {
      const responseId = typeof event.llm_response_id === "string" ? event.llm_response_id : null;
      if (event.source === "agent" && responseId !== null && (event.kind === "MessageEvent" || event.kind === "ActionEvent")) {
        if (assistant === null || assistant.id !== responseId) {
          flush();
          assistant = { id: responseId, parts: [], calls: [] };
        }
        if (event.kind === "MessageEvent") {
          const text = ((event.llm_message as { content?: { text?: string }[] }).content ?? [])
            .map((part) => part.text ?? "")
            .join("");
          if (text !== "") assistant.parts.push({ type: "text", text });
        } else {
          if (assistant.parts.length === 0 && typeof event.thought === "string" && event.thought !== "") {
            assistant.parts.push({ type: "text", text: event.thought });
          }
          assistant.parts.push({
            type: "tool-call",
            toolCallId: String(event.tool_call_id),
            toolName: String(event.tool_name),
            input: event.action ?? {},
          });
          assistant.calls.push(String(event.tool_call_id));
        }
        continue;
      }
      if (event.kind === "MessageEvent" && event.source === "user") {
        flush();
        const content = (
          event.llm_message as { content: ({ type: "text"; text: string } | { type: "image"; image_urls: string[] })[] }
        ).content;
        const parts: (TextPart | ImagePart)[] = content.flatMap((part): (TextPart | ImagePart)[] =>
          part.type === "text"
            ? [{ type: "text", text: part.text }]
            : part.image_urls.map((url) => ({ type: "image", image: new URL(url) })),
        );
        messages.push({ role: "user", content: parts });
        continue;
      }
      if (event.kind === "ObservationEvent" && event.tool_call_id === null && event.observation) {
        flush();
        const setup = event.observation as { command?: string; output?: string; exit_code?: number | null };
        messages.push({
          role: "user",
          content: `[The repository's setup script ran: ${setup.command} exited with ${setup.exit_code}]\n${setup.output ?? ""}`,
        });
      }
    }
    flush();
    return messages;
  }
}

function addUsage(metrics: Metrics, usage: TokenUsage): Metrics {
  const total = { ...metrics.accumulated_token_usage };
  for (const key of Object.keys(total) as (keyof TokenUsage)[]) total[key] += usage[key];
  return { ...metrics, accumulated_token_usage: total };
}
