/** What a sandbox's runtime is started with. */
export interface RuntimeLaunch {
  /** The token the runtime trusts; only the SandboxDO knows it. */
  token: string;
  /** The named container image (see `[containers.images]`) and instance size. */
  image: string;
  instanceType: string;
  workingDir: string;
  env: Record<string, string>;
}

/**
 * How a SandboxDO reaches its runtime: start it, talk HTTP to it, stop it. `stop` also loses
 * the runtime's disk, on every backend, which is why pause snapshots first.
 */
export interface SandboxBackend {
  readonly kind: "container" | "local";
  /** Launches the runtime; resolves once it is launched, not necessarily answering yet. */
  start(launch: RuntimeLaunch): Promise<void>;
  /** Sends a request to the runtime; the URL's path and query are the runtime's. */
  fetch(request: Request): Promise<Response>;
  /** Stops the runtime and deletes its disk; idempotent. */
  stop(): Promise<void>;
}

/** The runtime's port inside a container. */
export const RUNTIME_PORT = 8080;

/** A request to the runtime, authenticated with its token. */
export function runtimeRequest(path: string, token: string, init: RequestInit = {}): Request {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return new Request(`http://runtime${path}`, { ...init, headers });
}
