/**
 * The local sandbox host: what Cloudflare Containers are to production, for local development
 * and tests. It spawns one sandbox runtime process per sandbox, each in its own directory and on
 * its own port, and stopping one kills it and every process it started and deletes its
 * directory, exactly as a container loses its processes and disk. Listens on 127.0.0.1 only.
 *
 *   POST   /sandboxes/{id}/start  {token, env}  → {url, pid, directory}   (idempotent while running)
 *   GET    /sandboxes/{id}                      → {running, url, pid, directory, directory_exists}
 *   POST   /sandboxes/{id}/kill                 → the process dies, its directory stays (a crash)
 *   DELETE /sandboxes/{id}                      → stopped and its directory deleted
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const RUNTIME = resolve(dirname(fileURLToPath(import.meta.url)), "..", "container", "runtime", "server.ts");
const READY = /SANDBOX_RUNTIME_READY port=(\d+)/;
const TAG_VARIABLE = "LOCAL_SANDBOX_TAG";

interface Runtime {
  child: ChildProcess;
  /** In the environment of the runtime and so of every process it starts (see killTagged). */
  tag: string;
  url: string;
  directory: string;
  exited: boolean;
}

export interface SandboxHost {
  url: string;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  let text = "";
  for await (const chunk of req) text += chunk;
  return text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
}

function spawnRuntime(directory: string, token: string, env: Record<string, string>, readyTimeoutMs: number): Promise<Runtime> {
  const workdir = join(directory, "workspace");
  mkdirSync(workdir, { recursive: true });
  const tag = randomUUID();
  const child = spawn(process.execPath, ["--experimental-strip-types", "--no-warnings", RUNTIME], {
    cwd: workdir,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: workdir,
      ...env,
      SANDBOX_RUNTIME_TOKEN: token,
      WORKDIR: workdir,
      // Deleted with the sandbox's directory, as a container's disk is.
      RUNTIME_STATE_DIR: join(directory, "runtime"),
      HOST: "127.0.0.1",
      PORT: "0",
      [TAG_VARIABLE]: tag,
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const runtime: Runtime = { child, tag, url: "", directory, exited: false };
  child.on("exit", () => {
    runtime.exited = true;
  });
  return new Promise((resolveReady, reject) => {
    let output = "";
    const timer = setTimeout(() => {
      killTree(child);
      reject(new Error(`runtime did not start within ${readyTimeoutMs} ms: ${output.slice(-500)}`));
    }, readyTimeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      const match = READY.exec(output);
      if (match && runtime.url === "") {
        clearTimeout(timer);
        runtime.url = `http://127.0.0.1:${match[1]}`;
        resolveReady(runtime);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (runtime.url === "") reject(new Error(`runtime exited with ${code}: ${output.slice(-500)}`));
    });
  });
}

/**
 * Kills every process whose environment carries the runtime's tag: its commands run in process
 * groups of their own, and what they leave running (a dev server, a watcher) would outlive the
 * runtime's group. A container loses all of them on stop; so does a local sandbox. Linux only
 * (elsewhere the runtime's group is all that is killed).
 */
function killTagged(tag: string): void {
  if (process.platform !== "linux") return;
  const needle = Buffer.from(`${TAG_VARIABLE}=${tag}\0`);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`).includes(needle)) process.kill(Number(entry), "SIGKILL");
    } catch {
      // Gone already, or not ours to read.
    }
  }
}

function killTree(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}

export function startSandboxHost(options: { root: string; port?: number; readyTimeoutMs?: number }): Promise<SandboxHost> {
  const root = resolve(options.root);
  mkdirSync(root, { recursive: true });
  const runtimes = new Map<string, Runtime>();
  const starting = new Map<string, Promise<Runtime>>();
  // Bumped by every stop, so that a start that finishes after a stop is undone, not leaked.
  const generations = new Map<string, number>();

  const stop = (id: string, deleteDirectory: boolean) => {
    generations.set(id, (generations.get(id) ?? 0) + 1);
    const runtime = runtimes.get(id);
    if (runtime) {
      killTree(runtime.child);
      killTagged(runtime.tag);
    }
    if (deleteDirectory) {
      runtimes.delete(id);
      rmSync(join(root, id), { recursive: true, force: true });
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://host");
    if (url.pathname === "/health") return send(res, 200, { status: "ok", sandboxes: runtimes.size });
    const match = /^\/sandboxes\/([A-Za-z0-9_-]{1,128})(\/start|\/kill)?$/.exec(url.pathname);
    if (!match) return send(res, 404, { detail: "no such route", code: "NOT_FOUND" });
    const id = match[1] as string;
    const action = `${req.method} ${match[2] ?? ""}`;
    const directory = join(root, id);
    if (action === "POST /start") {
      const body = await readJson(req);
      const token = typeof body.token === "string" ? body.token : "";
      const env = (typeof body.env === "object" && body.env !== null ? body.env : {}) as Record<string, string>;
      const existing = runtimes.get(id);
      if (existing && !existing.exited) return send(res, 200, { url: existing.url, pid: existing.child.pid, directory });
      const generation = generations.get(id) ?? 0;
      let pending = starting.get(id);
      if (!pending) {
        pending = spawnRuntime(directory, token, env, options.readyTimeoutMs ?? 30_000);
        starting.set(id, pending);
      }
      try {
        const runtime = await pending;
        if ((generations.get(id) ?? 0) !== generation) {
          killTree(runtime.child);
          rmSync(directory, { recursive: true, force: true });
          return send(res, 409, { detail: "the sandbox was stopped while it started", code: "STOPPED_WHILE_STARTING" });
        }
        runtimes.set(id, runtime);
        return send(res, 200, { url: runtime.url, pid: runtime.child.pid, directory });
      } catch (error) {
        return send(res, 502, { detail: String(error), code: "RUNTIME_START_FAILED" });
      } finally {
        starting.delete(id);
      }
    }
    if (action === "GET ") {
      const runtime = runtimes.get(id);
      return send(res, 200, {
        running: runtime !== undefined && !runtime.exited,
        url: runtime?.url ?? null,
        pid: runtime?.child.pid ?? null,
        directory,
        directory_exists: existsSync(directory),
      });
    }
    if (action === "POST /kill") {
      stop(id, false);
      return send(res, 200, { success: true });
    }
    if (action === "DELETE ") {
      stop(id, true);
      return send(res, 200, { success: true });
    }
    return send(res, 405, { detail: "method not allowed", code: "METHOD_NOT_ALLOWED" });
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => send(res, 500, { detail: String(error), code: "HOST_ERROR" }));
  });
  return new Promise((resolveListening) => {
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      resolveListening({
        url: `http://127.0.0.1:${port}`,
        close: async () => {
          for (const id of [...runtimes.keys()]) stop(id, true);
          await new Promise<void>((done) => server.close(() => done()));
        },
      });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const host = await startSandboxHost({
    root: process.env.SANDBOX_HOST_ROOT ?? ".sandboxes",
    port: Number(process.env.SANDBOX_HOST_PORT ?? 8788),
  });
  console.log(`sandbox host on ${host.url}`);
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => host.close().then(() => process.exit(0)));
}
