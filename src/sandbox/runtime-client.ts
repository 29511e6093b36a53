import { PROXY_USER_HEADER } from "../services/proxy-headers";

/** What `POST /exec` answers (container/README.md). */
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

export interface ExecRequest {
  argv?: string[];
  command?: string;
  cwd?: string;
  /** For this command only: never the runtime's or later commands' environment. */
  env?: Record<string, string>;
  timeout_ms?: number;
}

export interface FileStat {
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  mode: string;
  modified_at: string;
}

/** The runtime could not do what was asked: it is not running, or answered an error. */
export class RuntimeCallError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | null,
  ) {
    super(message);
    this.name = "RuntimeCallError";
  }
}

/**
 * Worker-side client of a sandbox's runtime, for the platform's own work in a sandbox (preparing
 * a repository, and the agent's tools). It goes through the SandboxDO as the sandbox's owner,
 * so activity is recorded and a sandbox that is not RUNNING answers a clear 409.
 */
export class RuntimeClient {
  constructor(
    private readonly env: Env,
    readonly sandboxId: string,
    private readonly userId: string,
  ) {}

  private async request(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set(PROXY_USER_HEADER, this.userId);
    return this.env.SANDBOX.getByName(this.sandboxId).fetch(new Request(`http://sandbox${path}`, { ...init, headers }));
  }

  private async fail(response: Response, what: string): Promise<never> {
    const body = (await response.json().catch(() => null)) as { detail?: unknown; code?: unknown } | null;
    const detail = typeof body?.detail === "string" ? body.detail : `HTTP ${response.status}`;
    throw new RuntimeCallError(`${what}: ${detail}`, response.status, typeof body?.code === "string" ? body.code : null);
  }

  async exec(command: ExecRequest): Promise<ExecResult> {
    const response = await this.request("/exec", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(command),
    });
    if (!response.ok) return this.fail(response, "The sandbox could not run a command");
    return (await response.json()) as ExecResult;
  }

  /** The path's stat, or null when nothing is there. */
  async stat(path: string): Promise<FileStat | null> {
    const response = await this.request(`/files/stat?path=${encodeURIComponent(path)}`);
    if (response.status === 404) {
      await response.body?.cancel();
      return null;
    }
    if (!response.ok) return this.fail(response, `The sandbox could not stat ${path}`);
    return (await response.json()) as FileStat;
  }

  /** A JSON call to the runtime; errors become `RuntimeCallError`. */
  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.headers = { "Content-Type": "application/json" };
      init.body = JSON.stringify(body);
    }
    const response = await this.request(path, init);
    if (!response.ok) return this.fail(response, `The sandbox could not answer ${method} ${path.split("?")[0]}`);
    return (await response.json()) as T;
  }

  /** A text file's content, or null when there is no such file. */
  async readText(path: string): Promise<string | null> {
    const response = await this.request(`/files?path=${encodeURIComponent(path)}`);
    if (response.status === 404) {
      await response.body?.cancel();
      return null;
    }
    if (!response.ok) return this.fail(response, `The sandbox could not read ${path}`);
    return new TextDecoder().decode(await response.arrayBuffer());
  }

  async list(path: string): Promise<{ path: string; entries: FileStat[] }> {
    return this.json("GET", `/files/list?path=${encodeURIComponent(path)}`);
  }

  async writeFile(path: string, content: string, mode = "0644"): Promise<void> {
    const response = await this.request(`/files?path=${encodeURIComponent(path)}&mode=${mode}`, { method: "PUT", body: content });
    if (!response.ok) return this.fail(response, `The sandbox could not write ${path}`);
    await response.body?.cancel();
  }
}
