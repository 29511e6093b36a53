import { RUNTIME_PORT, type RuntimeLaunch, type SandboxBackend } from "./backend";

/** The slice of `ctx.container` this backend uses, so that tests can stand in for it. */
export type ContainerHandle = Pick<Container, "start" | "getTcpPort" | "destroy" | "running" | "images">;

/** Production: the runtime runs in this SandboxDO's Cloudflare container. */
export class ContainerBackend implements SandboxBackend {
  readonly kind = "container";

  constructor(private readonly container: ContainerHandle) {}

  async start(launch: RuntimeLaunch): Promise<void> {
    if (this.container.running) return;
    const image = this.container.images[launch.image];
    if (image === undefined) throw new Error(`container image '${launch.image}' is not declared in wrangler.toml`);
    this.container.start({
      image,
      instance: launch.instanceType as NonNullable<ContainerStartupOptions["instance"]>,
      enableInternet: true,
      env: { ...launch.env, SANDBOX_RUNTIME_TOKEN: launch.token, WORKDIR: launch.workingDir, PORT: String(RUNTIME_PORT) },
    });
  }

  fetch(request: Request): Promise<Response> {
    return this.container.getTcpPort(RUNTIME_PORT).fetch(request);
  }

  async stop(): Promise<void> {
    if (this.container.running) await this.container.destroy();
  }
}
