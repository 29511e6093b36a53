import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";

export interface SessionRunResult {
  output: string;
  exit_code: number | null;
  timed_out: boolean;
  truncated: boolean;
  cwd: string;
}

const MAX_SESSION_OUTPUT = 1024 * 1024;

/** Every live descendant of `pid`, read from /proc (children before grandchildren). */
function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Field 4 (ppid) follows the parenthesised command name, which may itself hold spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = parents.get(ppid) ?? [];
      list.push(Number(entry));
      parents.set(ppid, list);
    } catch {
      // The process ended while we looked.
    }
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = queue.shift() as number;
    for (const child of parents.get(next) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/**
 * A persistent bash for the agent's terminal: the working directory and exported variables
 * carry over between commands. Each command runs through `eval` with stdin from /dev/null, so
 * a command that reads input cannot swallow the protocol; a marker line with a per-session
 * nonce reports its exit code and the new cwd. A command past its timeout is interrupted
 * (its processes get SIGINT, then SIGKILL) and the shell stays usable.
 */
export class ShellSession {
  readonly id: string;
  private readonly shell: ChildProcessWithoutNullStreams;
  private readonly nonce = randomBytes(12).toString("hex");
  private buffer = "";
  private waiter: ((line: { exit: number; cwd: string } | null) => void) | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private exited = false;
  lastUsed = Date.now();

  constructor(id: string, cwd: string, env: NodeJS.ProcessEnv) {
    this.id = id;
    this.shell = spawn("bash", ["--noprofile", "--norc"], {
      cwd,
      env: { ...env, PS1: "", PS2: "" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.shell.stdout.on("data", (chunk: Buffer) => this.onOutput(chunk));
    this.shell.stderr.on("data", (chunk: Buffer) => this.onOutput(chunk));
    this.shell.on("exit", () => {
      this.exited = true;
      this.waiter?.(null);
    });
    this.shell.stdin.on("error", () => {});
  }

  get alive(): boolean {
    return !this.exited;
  }

  private onOutput(chunk: Buffer): void {
    this.buffer += chunk.toString("utf8");
    const marker = new RegExp(`\\n?__SESSION_DONE_${this.nonce}_(\\d+)_(.*)__\\n`);
    const match = marker.exec(this.buffer);
    if (match && this.waiter) {
      this.buffer = this.buffer.slice(0, match.index) + this.buffer.slice(match.index + match[0].length);
      this.waiter({ exit: Number(match[1]), cwd: match[2] ?? "" });
    }
  }

  /** Runs one command after any still queued; never two at once in the same shell. */
  run(command: string, timeoutMs: number): Promise<SessionRunResult> {
    const result = this.queue.then(() => this.runNow(command, timeoutMs));
    this.queue = result.catch(() => undefined);
    return result;
  }

  private runNow(command: string, timeoutMs: number): Promise<SessionRunResult> {
    this.lastUsed = Date.now();
    if (this.exited)
      return Promise.resolve({
        output: "The shell session has exited; start a new one.",
        exit_code: null,
        timed_out: false,
        truncated: false,
        cwd: "",
      });
    this.buffer = "";
    const encoded = Buffer.from(command, "utf8").toString("base64");
    return new Promise((resolve) => {
      let timedOut = false;
      const finish = (done: { exit: number; cwd: string } | null) => {
        clearTimeout(timer);
        clearTimeout(hardTimer);
        this.waiter = null;
        let output = this.buffer;
        this.buffer = "";
        const truncated = output.length > MAX_SESSION_OUTPUT;
        if (truncated) output = output.slice(-MAX_SESSION_OUTPUT);
        resolve({ output, exit_code: done?.exit ?? null, timed_out: timedOut, truncated, cwd: done?.cwd ?? "" });
      };
      this.waiter = finish;
      const interrupt = (signal: NodeJS.Signals) => {
        for (const pid of descendants(this.shell.pid ?? -1)) {
          try {
            process.kill(pid, signal);
          } catch {
            // Already gone.
          }
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        interrupt("SIGINT");
      }, timeoutMs);
      const hardTimer = setTimeout(() => interrupt("SIGKILL"), timeoutMs + 2000);
      this.shell.stdin.write(
        `eval "$(printf '%s' '${encoded}' | base64 -d)" < /dev/null; printf '\\n__SESSION_DONE_${this.nonce}_%s_%s__\\n' "$?" "$PWD"\n`,
      );
    });
  }

  close(): void {
    for (const pid of descendants(this.shell.pid ?? -1)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
    this.shell.kill("SIGKILL");
  }
}
