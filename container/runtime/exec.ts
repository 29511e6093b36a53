import { type ChildProcess, spawn } from "node:child_process";

export interface ExecRequest {
  /** Exactly one of argv (run directly) and command (run by bash -c). */
  argv?: string[];
  command?: string;
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  stdin?: string;
}

export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  timed_out: boolean;
  duration_ms: number;
}

export const MAX_CAPTURED_OUTPUT = 1024 * 1024;

function start(request: ExecRequest, baseEnv: NodeJS.ProcessEnv): ChildProcess {
  const [file, ...args] = request.argv ?? ["bash", "-c", request.command ?? ""];
  if (file === undefined) throw new Error("empty argv");
  // Its own process group, so that a timeout kills the command and everything it started.
  return spawn(file, args, {
    cwd: request.cwd,
    env: { ...baseEnv, ...request.env },
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
  });
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}

/**
 * Runs one command to completion. `onOutput`, when given, receives output as it comes (the
 * streamed variant); the result always carries the captured output, capped at 1 MiB a stream.
 */
export function runCommand(
  request: ExecRequest,
  baseEnv: NodeJS.ProcessEnv,
  onOutput?: (stream: "stdout" | "stderr", text: string) => void,
): Promise<ExecResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = start(request, baseEnv);
    } catch (error) {
      resolve({
        exit_code: 127,
        signal: null,
        stdout: "",
        stderr: String(error),
        stdout_truncated: false,
        stderr_truncated: false,
        timed_out: false,
        duration_ms: 0,
      });
      return;
    }
    const captured = { stdout: "", stderr: "" };
    const truncated = { stdout: false, stderr: false };
    let timedOut = false;
    const capture = (stream: "stdout" | "stderr") => (chunk: Buffer) => {
      const text = chunk.toString("utf8");
      onOutput?.(stream, text);
      const room = MAX_CAPTURED_OUTPUT - captured[stream].length;
      if (text.length > room) truncated[stream] = true;
      if (room > 0) captured[stream] += text.slice(0, room);
    };
    child.stdout?.on("data", capture("stdout"));
    child.stderr?.on("data", capture("stderr"));
    child.stdin?.on("error", () => {});
    child.stdin?.end(request.stdin ?? "");
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, request.timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve({
        exit_code: 127,
        signal: null,
        stdout: "",
        stderr: error.message,
        stdout_truncated: false,
        stderr_truncated: false,
        timed_out: false,
        duration_ms: Date.now() - started,
      });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({
        exit_code: code,
        signal,
        stdout: captured.stdout,
        stderr: captured.stderr,
        stdout_truncated: truncated.stdout,
        stderr_truncated: truncated.stderr,
        timed_out: timedOut,
        duration_ms: Date.now() - started,
      });
    });
  });
}
