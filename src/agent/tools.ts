import { type ToolSet, tool, zodSchema } from "ai";
import { z } from "zod";
import type { AgentType } from "../conversation/types";
import { RuntimeCallError, type RuntimeClient } from "../sandbox/runtime-client";

/**
 * The agent's tools, with the reference's names and arguments (CONTRACT.md, The agent). The
 * model sees their schemas; the loop runs them here, in the sandbox, through the runtime.
 */

/** Past this many characters a tool's output is cut, with a note saying so. */
export const MAX_OUTPUT_CHARS = 30_000;
const DEFAULT_COMMAND_TIMEOUT_S = 120;
const MAX_COMMAND_TIMEOUT_S = 1800;
const SHELL_SESSION = "agent";

const TerminalInput = z.object({
  command: z.string().describe("The bash command to run. Chain commands with && or ;."),
  is_input: z
    .boolean()
    .optional()
    .describe("Send the command as input to a running process (not supported: commands run to completion)."),
  timeout: z
    .number()
    .positive()
    .optional()
    .describe(`Seconds before the command is interrupted (default ${DEFAULT_COMMAND_TIMEOUT_S}).`),
  reset: z.boolean().optional().describe("Start a fresh shell (cwd and variables are lost)."),
});

const FileEditorInput = z.object({
  command: z.enum(["view", "create", "str_replace", "insert", "undo_edit"]),
  path: z.string().describe("Absolute path to a file or directory (relative paths are taken from the working directory)."),
  file_text: z.string().optional().describe("create: the whole content of the new file."),
  old_str: z.string().optional().describe("str_replace: the exact text to replace; it must appear exactly once."),
  new_str: z.string().optional().describe("str_replace: the replacement. insert: the text to insert."),
  insert_line: z.number().int().min(0).optional().describe("insert: the line after which new_str goes (0 = the top)."),
  view_range: z
    .array(z.number().int())
    .length(2)
    .optional()
    .describe("view: [first, last] line, 1-based; last = -1 for the end."),
});

const TaskSchema = z.object({
  title: z.string(),
  notes: z.string().optional().default(""),
  status: z.enum(["todo", "in_progress", "done"]).default("todo"),
});

const TaskTrackerInput = z.object({
  command: z.enum(["view", "plan"]),
  task_list: z.array(TaskSchema).optional().describe("plan: the whole task list, replacing the previous one."),
});

const ThinkInput = z.object({ thought: z.string() });
const FinishInput = z.object({ message: z.string().describe("What was done, for the user.") });

export type TrackedTask = z.infer<typeof TaskSchema>;

function buildTools(agentType: AgentType): ToolSet {
  const editorScope = agentType === "plan" ? " In plan mode, only PLAN.md in the working directory may be changed." : "";
  const tools: ToolSet = {
    file_editor: tool({
      description: `View, create and edit files. view shows a file with line numbers, or lists a directory two levels deep. str_replace replaces one exact, unique occurrence. undo_edit reverts the last edit of a file.${editorScope}`,
      inputSchema: zodSchema(FileEditorInput),
    }),
    task_tracker: tool({
      description: "Keep a plan of the work: plan replaces the task list, view shows it.",
      inputSchema: zodSchema(TaskTrackerInput),
    }),
    think: tool({ description: "Think through a problem; changes nothing.", inputSchema: zodSchema(ThinkInput) }),
    finish: tool({ description: "Finish the task, with a summary for the user.", inputSchema: zodSchema(FinishInput) }),
  };
  if (agentType === "default") {
    tools.terminal = tool({
      description:
        "Run a bash command in a persistent shell in the sandbox: the working directory and exported variables carry over between calls. Long output is truncated. Commands run non-interactively to completion.",
      inputSchema: zodSchema(TerminalInput),
    });
  }
  return tools;
}

const toolSets = new Map<AgentType, ToolSet>();

/**
 * The tools of an agent type. Built once per isolate: their JSON schemas are computed on first
 * use and then reused by every model call (the AI SDK caches them on the schema wrapper).
 */
export function agentTools(agentType: AgentType): ToolSet {
  let tools = toolSets.get(agentType);
  if (tools === undefined) {
    tools = buildTools(agentType);
    toolSets.set(agentType, tools);
  }
  return tools;
}

/** What running a tool gave: the event's `observation`, and the text the model reads. */
export interface ToolOutcome {
  observation: Record<string, unknown>;
  text: string;
  /** A failure the model should see and act on (an AgentErrorEvent). */
  error?: boolean;
  /** Set by `finish`: the run is over. */
  finished?: string;
}

/** Where a tool runs, and the conversation state some tools keep. */
export interface ToolContext {
  runtime: RuntimeClient;
  /** The absolute path of the conversation's working copy. */
  workdir: string;
  agentType: AgentType;
  history: { push(path: string, content: string | null): void; pop(path: string): string | null | undefined };
  tasks: { get(): TrackedTask[]; set(tasks: TrackedTask[]): void };
}

/** Tools whose call can be repeated without effect (safe to run again after an interruption). */
export function isReadOnlyCall(name: string, input: unknown): boolean {
  if (name === "think" || name === "finish") return true;
  const command = (input as { command?: unknown } | null)?.command;
  if (name === "task_tracker") return command === "view";
  if (name === "file_editor") return command === "view";
  return false;
}

function failure(text: string, observation: Record<string, unknown> = {}): ToolOutcome {
  return { observation: { error: text, ...observation }, text, error: true };
}

export function truncate(text: string, limit = MAX_OUTPUT_CHARS): { text: string; truncated: boolean } {
  if (text.length <= limit) return { text, truncated: false };
  const head = text.slice(0, Math.floor(limit / 3));
  const tail = text.slice(text.length - Math.floor((limit * 2) / 3));
  const cut = text.length - head.length - tail.length;
  return { text: `${head}\n[... ${cut} characters of output truncated ...]\n${tail}`, truncated: true };
}

export async function runTool(name: string, rawInput: unknown, context: ToolContext): Promise<ToolOutcome> {
  try {
    switch (name) {
      case "terminal":
        if (context.agentType !== "default") return failure("The terminal is not available in plan mode.");
        return await terminal(parse(TerminalInput, rawInput), context);
      case "file_editor":
        return await fileEditor(parse(FileEditorInput, rawInput), context);
      case "task_tracker":
        return taskTracker(parse(TaskTrackerInput, rawInput), context);
      case "think":
        parse(ThinkInput, rawInput);
        return { observation: { content: "Your thought has been logged." }, text: "Your thought has been logged." };
      case "finish": {
        const { message } = parse(FinishInput, rawInput);
        return { observation: { message }, text: message, finished: message };
      }
      default:
        return failure(
          `There is no tool named '${name}'. The tools are: ${Object.keys(agentTools(context.agentType)).join(", ")}.`,
        );
    }
  } catch (error) {
    if (error instanceof ToolInputError) return failure(error.message);
    if (error instanceof RuntimeCallError && error.status !== 409 && error.status < 500) return failure(error.message);
    throw error;
  }
}

class ToolInputError extends Error {}

function parse<T extends z.ZodType>(schema: T, input: unknown): z.infer<T> {
  const result = schema.safeParse(input);
  if (!result.success) {
    const issues = result.error.issues.map((issue) => `${issue.path.join(".") || "input"}: ${issue.message}`).join("; ");
    throw new ToolInputError(`Invalid arguments: ${issues}.`);
  }
  return result.data;
}

// ---- terminal ------------------------------------------------------------------------------

interface SessionRun {
  output: string;
  exit_code: number | null;
  timed_out: boolean;
  truncated: boolean;
  cwd: string;
}

async function terminal(input: z.infer<typeof TerminalInput>, context: ToolContext): Promise<ToolOutcome> {
  if (input.is_input) {
    return failure(
      "This terminal cannot send input to a running process: every command runs to completion with no stdin. Use non-interactive flags (for example -y) or pipe input into the command.",
    );
  }
  const { runtime } = context;
  if (input.reset) await runtime.json("DELETE", `/sessions/${SHELL_SESSION}`).catch(() => undefined);
  const timeoutS = Math.min(input.timeout ?? DEFAULT_COMMAND_TIMEOUT_S, MAX_COMMAND_TIMEOUT_S);
  const run = () =>
    runtime.json<SessionRun>("POST", `/sessions/${SHELL_SESSION}/run`, { command: input.command, timeout_ms: timeoutS * 1000 });
  let result: SessionRun;
  try {
    result = await run();
  } catch (error) {
    // The shell is made on first use, and again after the sandbox restarted.
    if (!(error instanceof RuntimeCallError && error.code === "SESSION_NOT_FOUND")) throw error;
    await runtime.json("POST", "/sessions", { id: SHELL_SESSION, cwd: context.workdir });
    result = await run();
  }
  const { text, truncated } = truncate(result.output);
  let note = "";
  if (result.timed_out) note = `\n[The command was interrupted after ${timeoutS} s (timeout). The shell is still usable.]`;
  else if (result.exit_code !== 0) note = `\n[The command exited with code ${result.exit_code}.]`;
  return {
    observation: {
      command: input.command,
      output: text,
      exit_code: result.exit_code,
      timed_out: result.timed_out,
      truncated: truncated || result.truncated,
      cwd: result.cwd,
    },
    text: `${text}${note}\n[Current working directory: ${result.cwd}]`,
  };
}

// ---- file_editor ---------------------------------------------------------------------------

function resolvePath(path: string, workdir: string): string {
  const joined = path.startsWith("/") ? path : `${workdir}/${path}`;
  const parts: string[] = [];
  for (const part of joined.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

function numbered(content: string, first: number): string {
  const lines = content.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines.map((line, i) => `${String(first + i).padStart(6)}\t${line}`).join("\n");
}

/** A few lines around an edit, numbered, so the model can check it. */
function snippet(content: string, aroundLine: number, extra: number): string {
  const lines = content.split("\n");
  const first = Math.max(0, aroundLine - 4);
  const last = Math.min(lines.length, aroundLine + extra + 4);
  return numbered(lines.slice(first, last).join("\n"), first + 1);
}

async function fileEditor(input: z.infer<typeof FileEditorInput>, context: ToolContext): Promise<ToolOutcome> {
  const { runtime } = context;
  const path = resolvePath(input.path, context.workdir);
  if (input.command !== "view" && context.agentType === "plan" && path !== resolvePath("PLAN.md", context.workdir)) {
    return failure(`In plan mode only ${resolvePath("PLAN.md", context.workdir)} may be changed; ${path} is read-only.`);
  }
  const stat = await runtime.stat(path);
  const base = { command: input.command, path };
  switch (input.command) {
    case "view": {
      if (stat === null) return failure(`The path ${path} does not exist.`, base);
      if (stat.type === "directory") return viewDirectory(path, context);
      const content = (await runtime.readText(path)) ?? "";
      const total = content.split("\n").length - (content.endsWith("\n") ? 1 : 0);
      const first = input.view_range?.[0] ?? 1;
      const requestedLast = input.view_range?.[1] ?? -1;
      const last = requestedLast === -1 ? total : requestedLast;
      if (first < 1 || first > Math.max(total, 1) || last < first || last > total) {
        return failure(`Invalid view_range [${input.view_range?.join(", ")}]: the file has ${total} lines.`, base);
      }
      const selected = content
        .split("\n")
        .slice(first - 1, last)
        .join("\n");
      const { text } = truncate(numbered(selected, first));
      return {
        observation: { ...base, content: text },
        text: `Here is ${path}${input.view_range ? ` (lines ${first}-${last})` : ""}:\n${text}`,
      };
    }
    case "create": {
      if (input.file_text === undefined) return failure("create needs file_text.", base);
      if (stat !== null) return failure(`${path} already exists; use str_replace to change it, or choose another path.`, base);
      context.history.push(path, null);
      await runtime.writeFile(path, input.file_text);
      return { observation: { ...base, new_content: input.file_text }, text: `Created ${path}.` };
    }
    case "str_replace": {
      if (input.old_str === undefined) return failure("str_replace needs old_str.", base);
      if (stat === null || stat.type !== "file") return failure(`${path} is not a file.`, base);
      const content = (await runtime.readText(path)) ?? "";
      const occurrences = countOccurrences(content, input.old_str);
      if (occurrences.length === 0) {
        return failure(
          `No replacement was made: old_str did not appear verbatim in ${path}. View the file and copy the exact text, whitespace included.`,
          base,
        );
      }
      if (occurrences.length > 1) {
        const lines = occurrences.map((index) => content.slice(0, index).split("\n").length);
        return failure(
          `No replacement was made: old_str appears ${occurrences.length} times in ${path} (lines ${lines.join(", ")}). Include more surrounding lines so that it is unique.`,
          base,
        );
      }
      const index = occurrences[0] ?? 0;
      const newStr = input.new_str ?? "";
      const updated = content.slice(0, index) + newStr + content.slice(index + input.old_str.length);
      context.history.push(path, content);
      await runtime.writeFile(path, updated, stat.mode);
      const line = content.slice(0, index).split("\n").length;
      return {
        observation: { ...base, old_content: content, new_content: updated },
        text: `Edited ${path}. The changed region:\n${snippet(updated, line - 1, newStr.split("\n").length)}\nCheck that the edit is as intended.`,
      };
    }
    case "insert": {
      if (input.insert_line === undefined || input.new_str === undefined)
        return failure("insert needs insert_line and new_str.", base);
      if (stat === null || stat.type !== "file") return failure(`${path} is not a file.`, base);
      const content = (await runtime.readText(path)) ?? "";
      const lines = content.split("\n");
      const trailing = content.endsWith("\n");
      if (trailing) lines.pop();
      if (input.insert_line > lines.length)
        return failure(`insert_line ${input.insert_line} is past the end: the file has ${lines.length} lines.`, base);
      lines.splice(input.insert_line, 0, ...input.new_str.split("\n"));
      const updated = lines.join("\n") + (trailing || content === "" ? "\n" : "");
      context.history.push(path, content);
      await runtime.writeFile(path, updated, stat.mode);
      return {
        observation: { ...base, old_content: content, new_content: updated },
        text: `Inserted into ${path}:\n${snippet(updated, input.insert_line, input.new_str.split("\n").length)}`,
      };
    }
    case "undo_edit": {
      const previous = context.history.pop(path);
      if (previous === undefined) return failure(`There is no edit of ${path} to undo.`, base);
      if (previous === null) {
        await runtime.json("DELETE", `/files?path=${encodeURIComponent(path)}`);
        return { observation: { ...base }, text: `Undid the creation of ${path}: it is deleted.` };
      }
      await runtime.writeFile(path, previous, stat?.mode ?? "0644");
      return { observation: { ...base, new_content: previous }, text: `Undid the last edit of ${path}.` };
    }
  }
}

function countOccurrences(content: string, needle: string): number[] {
  const found: number[] = [];
  if (needle === "") return found;
  let from = 0;
  for (;;) {
    const index = content.indexOf(needle, from);
    if (index === -1) return found;
    found.push(index);
    from = index + 1;
  }
}

async function viewDirectory(path: string, context: ToolContext): Promise<ToolOutcome> {
  const lines: string[] = [];
  const top = await context.runtime.list(path);
  for (const entry of top.entries) {
    const name = entry.path.split("/").at(-1) ?? entry.path;
    if (name.startsWith(".")) continue;
    lines.push(entry.type === "directory" ? `${entry.path}/` : entry.path);
    if (entry.type !== "directory" || name === "node_modules") continue;
    const inner = await context.runtime.list(entry.path);
    for (const child of inner.entries) {
      if ((child.path.split("/").at(-1) ?? "").startsWith(".")) continue;
      lines.push(child.type === "directory" ? `${child.path}/` : child.path);
    }
  }
  const { text } = truncate(lines.join("\n"));
  return {
    observation: { command: "view", path, content: text },
    text: `Files and directories up to 2 levels deep in ${path}, hidden items excluded:\n${text}`,
  };
}

// ---- task_tracker --------------------------------------------------------------------------

function taskTracker(input: z.infer<typeof TaskTrackerInput>, context: ToolContext): ToolOutcome {
  if (input.command === "plan") {
    if (input.task_list === undefined) return failure("plan needs task_list.");
    context.tasks.set(input.task_list);
  }
  const tasks = context.tasks.get();
  const text =
    tasks.length === 0
      ? "The task list is empty."
      : tasks.map((task, i) => `${i + 1}. [${task.status}] ${task.title}${task.notes ? `: ${task.notes}` : ""}`).join("\n");
  return { observation: { command: input.command, task_list: tasks }, text };
}
