import type { RuntimeLaunch, SandboxBackend } from "./backend";

/**
 * The local backend: a client of the local sandbox host (scripts/sandbox-host.ts), which runs
 * each sandbox's runtime as a process in its own directory. Used when containers are off
 * (`npm start`, tests).
 */
export class LocalBackend implements SandboxBackend {
  readonly kind = "local";
  private runtimeUrl: string | null = null;

  constructor(
    private readonly hostUrl: string,
    private readonly sandboxId: string,
  ) {}

  private async host(path: string, init: RequestInit = {}): Promise<Response> {
    if (this.hostUrl === "") throw new Error("LOCAL_SANDBOX_HOST_URL is not set: start the service with `npm start`");
    return fetch(`${this.hostUrl}/sandboxes/${this.sandboxId}${path}`, init);
  }

  async start(launch: RuntimeLaunch): Promise<void> {
    const response = await this.host("/start", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: launch.token, env: launch.env }),
    });
    const body = (await response.json()) as { url?: string; detail?: string };
    if (!response.ok || body.url === undefined) throw new Error(body.detail ?? `sandbox host answered ${response.status}`);
    this.runtimeUrl = body.url;
  }

  async fetch(request: Request): Promise<Response> {
    if (this.runtimeUrl === null) {
      // After an eviction the object forgets the URL; the host still knows it.
      const state = (await (await this.host("")).json()) as { running: boolean; url: string | null };
      if (!state.running || state.url === null) throw new Error("the sandbox runtime is not running");
      this.runtimeUrl = state.url;
    }
    const url = new URL(request.url);
    return fetch(new Request(`${this.runtimeUrl}${url.pathname}${url.search}`, request));
  }

  async stop(): Promise<void> {
    this.runtimeUrl = null;
    const response = await this.host("", { method: "DELETE" });
    if (!response.ok) throw new Error(`sandbox host answered ${response.status} to stop`);
  }
}
