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
  /** The archive requests the runtime got (path and query), in order. */
  readonly archiveRequests: string[] = [];
  /** How many of the next streamed archives break halfway, as a cut connection does. */
  breakArchives = 0;
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
        const response = await fetch(new Request(`${base}${url.pathname}${url.search}`, request));
        if (url.pathname !== "/archive" || request.method !== "GET") return response;
        this.archiveRequests.push(`${url.pathname}${url.search}`);
        if (this.breakArchives === 0 || url.searchParams.get("spool") === "true" || response.body === null) return response;
        this.breakArchives -= 1;
        // Still of known length, as the runtime's answer is: the break comes mid-stream.
        const length = Number(response.headers.get("Content-Length"));
        const broken = new FixedLengthStream(length);
        halfThenFail(response.body, length)
          .pipeTo(broken.writable)
          .catch(() => undefined);
        return new Response(broken.readable, response);
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

/** Passes the first half of a body of `length` bytes, then errors. */
function halfThenFail(body: ReadableStream<Uint8Array>, length: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let passed = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done || passed + value.byteLength > length / 2) {
        controller.error(new Error("connection lost"));
        await reader.cancel().catch(() => undefined);
        return;
      }
      passed += value.byteLength;
      controller.enqueue(value);
    },
  });
}

export class StandInContainerSandboxDO extends SandboxDO {
  container: HostContainer | null = null;

  protected override createBackend(sandboxId: string): SandboxBackend {
    this.container = new HostContainer(this.env.LOCAL_SANDBOX_HOST_URL, sandboxId);
    return new ContainerBackend(this.container);
  }

  /** Breaks the next streamed archive halfway (a lost connection). */
  breakNextArchive(): void {
    if (this.container === null) throw new Error("the container has not been created yet");
    this.container.breakArchives += 1;
  }

  /** The archive requests the container's runtime got, in order. */
  archiveRequests(): string[] {
    return this.container?.archiveRequests ?? [];
  }

  /** What the backend asked the container to start with, for assertions. */
  containerStarts(): StartRecord[] {
    return this.container?.starts ?? [];
  }
}
