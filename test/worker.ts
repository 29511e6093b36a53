/**
 * The Worker under test: the real entry point, plus a SandboxDO whose `ctx.container` is a
 * stand-in that runs the real runtime through the local sandbox host. It lets the container
 * backend's code run in CI, where there is no container engine.
 */
import { SandboxDO } from "../src/durable-objects/sandbox-do";
import type { SandboxBackend } from "../src/sandbox/backend";
import { ContainerBackend, type ContainerHandle } from "../src/sandbox/container-backend";

export * from "../src/index";
export { default } from "../src/index";

export interface StartRecord {
  image: string | undefined;
  instance: unknown;
  env: Record<string, string>;
}

/** Plays `ctx.container`: start/destroy go to the local sandbox host, getTcpPort reaches the runtime. */
export class HostContainer implements ContainerHandle {
  running = false;
  readonly images = { full: "registry.cloudflare.com/agent-sandbox:full", slim: "registry.cloudflare.com/agent-sandbox:slim" };
  readonly starts: StartRecord[] = [];
  private started: Promise<string> | null = null;

  constructor(
    private readonly hostUrl: string,
    private readonly id: string,
  ) {}

  start(options?: ContainerStartupOptions): void {
    const env = options?.env ?? {};
    this.starts.push({ image: options?.image, instance: options?.instance, env });
    this.running = true;
    this.started = fetch(`${this.hostUrl}/sandboxes/${this.id}/start`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: env.SANDBOX_RUNTIME_TOKEN, env }),
    }).then(async (response) => ((await response.json()) as { url: string }).url);
  }

  getTcpPort(port: number): Fetcher {
    const fetcher = {
      fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
        if (port !== 8080) throw new Error(`nothing listens on port ${port}`);
        if (this.started === null) throw new Error("container is not running");
        const base = await this.started;
        const request = new Request(input, init);
        const url = new URL(request.url);
        return fetch(new Request(`${base}${url.pathname}${url.search}`, request));
      },
    };
    return fetcher as unknown as Fetcher;
  }

  async destroy(): Promise<void> {
    this.running = false;
    this.started = null;
    await fetch(`${this.hostUrl}/sandboxes/${this.id}`, { method: "DELETE" });
  }
}

export class StandInContainerSandboxDO extends SandboxDO {
  container: HostContainer | null = null;

  protected override createBackend(sandboxId: string): SandboxBackend {
    this.container = new HostContainer(this.env.LOCAL_SANDBOX_HOST_URL, sandboxId);
    return new ContainerBackend(this.container);
  }

  /** What the backend asked the container to start with, for assertions. */
  containerStarts(): StartRecord[] {
    return this.container?.starts ?? [];
  }
}
