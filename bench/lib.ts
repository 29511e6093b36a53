import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, totalmem } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

export function machine(): string {
  const cpu = cpus();
  return `${cpu.length} × ${cpu[0]?.model ?? "unknown CPU"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${process.platform}`;
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? Number.NaN;
}

export const ms = (value: number) => `${value.toFixed(1)} ms`;

export async function waitFor(check: () => Promise<boolean>, timeoutMs: number, intervalMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error("timed out");
}

/** How a benchmark's Worker runs: workerd through Miniflare (default), or the whole `wrangler dev`. */
export type WorkerHost = "workerd" | "wrangler-dev";

/** The host benchmarks run their Worker on: `BENCH_WORKER_HOST=wrangler-dev` for the dev server. */
export function benchHost(): WorkerHost {
  return process.env.BENCH_WORKER_HOST === "wrangler-dev" ? "wrangler-dev" : "workerd";
}

/** The host, as a report states it. */
export function describeHost(host: WorkerHost): string {
  return host === "workerd"
    ? "the Worker's bundle in workerd through Miniflare, no dev proxy (`BENCH_WORKER_HOST=wrangler-dev` for the dev server)"
    : "the Worker under `wrangler dev`, dev proxy included";
}

export interface RunningWorker {
  url: string;
  stop(): Promise<void>;
}

/**
 * Runs the Worker (or another `config`) for a benchmark, single-user, with its local state in
 * `persistDir`.
 *
 * By default it runs the way `wrangler dev` runs it minus wrangler's dev proxy: the config's
 * bundle (wrangler's own bundler, `deploy --dry-run`) in workerd through the Miniflare that
 * wrangler ships, with the bindings wrangler derives from the config. wrangler dev puts a proxy
 * Worker in a second workerd process in front of every request (for live reload); it costs
 * about 5 ms a request on this machine, more than some of the floors, and production has no such
 * hop. `host: "wrangler-dev"` (or BENCH_WORKER_HOST) measures through the whole dev server instead.
 */
export async function startWorker(
  port: number,
  persistDir: string,
  vars: Record<string, string>,
  options: { config?: string; host?: WorkerHost } = {},
): Promise<RunningWorker> {
  const config = options.config ?? join(ROOT, "wrangler.toml");
  const url = `http://127.0.0.1:${port}`;
  const allVars = { AUTH_MODE: "single-user", ...vars };
  if ((options.host ?? benchHost()) === "wrangler-dev") return startWranglerDev(port, persistDir, allVars, config, url);

  // The app's deploy bundles the web console's build as static assets, so it must exist.
  if (config === join(ROOT, "wrangler.toml") && !existsSync(join(ROOT, "web", "dist", "index.html"))) {
    execFileSync(join(ROOT, "node_modules", ".bin", "vite"), ["build", "web"], { cwd: ROOT, stdio: "ignore" });
  }
  const bundle = join(persistDir, "bundle");
  execFileSync(
    join(ROOT, "node_modules", ".bin", "wrangler"),
    ["deploy", "--dry-run", "--containers-rollout=none", "--config", config, "--outdir", bundle],
    { cwd: ROOT, stdio: "ignore" },
  );
  // The Miniflare wrangler itself runs (the top-level one belongs to the test pool).
  const fromWrangler = createRequire(createRequire(join(ROOT, "package.json")).resolve("wrangler"));
  const miniflare = (await import(pathToFileURL(fromWrangler.resolve("miniflare")).href)) as typeof import("miniflare");
  const { unstable_getMiniflareWorkerOptions } = await import("wrangler");
  const { workerOptions, main } = unstable_getMiniflareWorkerOptions(config);
  // The bundle is named after the entry module: src/index.ts → index.js.
  const script = join(bundle, `${basename(main ?? "index.js").replace(/\.[cm]?[jt]sx?$/, "")}.js`);
  // Static assets, module rules and the email binding do not apply to a prebuilt bundle.
  const { assets: _assets, modulesRules: _rules, rootPath: _root, email: _email, ...bindings } = workerOptions;
  const mf = new miniflare.Miniflare(
    miniflare.convertV4MiniflareOptions({
      ...bindings,
      name: "bench",
      modules: true,
      scriptPath: script,
      modulesRoot: bundle,
      bindings: { ...(workerOptions.bindings ?? {}), ...allVars },
      host: "127.0.0.1",
      port,
      defaultPersistRoot: join(persistDir, "state"),
      log: new miniflare.NoOpLog(),
      // BENCH_WORKER_LOGS=1 prints the Worker's logs (they cost time, so they are off by default).
      handleStructuredLogs: process.env.BENCH_WORKER_LOGS === "1" ? (log) => console.log(log.message) : () => undefined,
    }),
  );
  await mf.ready;
  return { url, stop: () => mf.dispose() };
}

async function startWranglerDev(
  port: number,
  persistDir: string,
  vars: Record<string, string>,
  config: string,
  url: string,
): Promise<RunningWorker> {
  const args = ["dev", "--config", config, "--port", String(port), "--persist-to", persistDir];
  args.push("--show-interactive-dev-session=false");
  for (const [name, value] of Object.entries(vars)) args.push("--var", `${name}:${value}`);
  const child: ChildProcess = spawn(join(ROOT, "node_modules", ".bin", "wrangler"), args, {
    cwd: ROOT,
    stdio: "ignore",
    detached: true,
  });
  // Any answer means it serves (the floor worker has no /health).
  await waitFor(async () => (await fetch(`${url}/health`)).status < 500, 60_000, 100);
  return {
    url,
    stop: async () => {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
    },
  };
}

/**
 * The local sandbox host in its own process, as `npm start` runs it beside the Worker, so that
 * its work (spawning runtimes, deleting directories) does not stall the benchmark's own client.
 */
export async function startSandboxHostProcess(root: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const child = spawn(
    process.execPath,
    ["--experimental-strip-types", "--no-warnings", join(ROOT, "scripts", "sandbox-host.ts")],
    {
      cwd: ROOT,
      env: { ...process.env, SANDBOX_HOST_ROOT: root, SANDBOX_HOST_PORT: String(port) },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  // If the benchmark dies, its host (and the host's runtimes) must not outlive it.
  process.on("exit", () => child.kill("SIGTERM"));
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("sandbox host on")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`the sandbox host exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

const RUNTIME = join(ROOT, "container", "runtime", "server.ts");
/** The token of runtimes a benchmark starts itself, to measure a floor. */
export const FLOOR_TOKEN = "bench-token-0123456789abcdef";

/** A runtime started straight from Node, the way the host does it, with a known token. */
export async function spawnFloorRuntime(dir: string): Promise<{ port: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--experimental-strip-types", "--no-warnings", RUNTIME], {
    env: { PATH: process.env.PATH ?? "", SANDBOX_RUNTIME_TOKEN: FLOOR_TOKEN, WORKDIR: dir, HOST: "127.0.0.1", PORT: "0" },
    stdio: ["ignore", "pipe", "ignore"],
  });
  const port = await new Promise<string>((resolve) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /port=(\d+)/.exec(out);
      if (match?.[1]) resolve(match[1]);
    });
  });
  return { port, child };
}
