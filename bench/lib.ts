import { type ChildProcess, spawn } from "node:child_process";
import { cpus, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

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

/** Runs the Worker (or another `config`) with `wrangler dev` (single-user, local state in `persistDir`) for a benchmark. */
export async function startWorker(
  port: number,
  persistDir: string,
  vars: Record<string, string>,
  config = "wrangler.toml",
): Promise<{ url: string; stop(): void }> {
  const args = [
    "dev",
    "--config",
    config,
    "--port",
    String(port),
    "--persist-to",
    persistDir,
    "--show-interactive-dev-session=false",
    "--var",
    "AUTH_MODE:single-user",
  ];
  for (const [name, value] of Object.entries(vars)) args.push("--var", `${name}:${value}`);
  const child: ChildProcess = spawn(join(ROOT, "node_modules", ".bin", "wrangler"), args, {
    cwd: ROOT,
    stdio: "ignore",
    detached: true,
  });
  const url = `http://127.0.0.1:${port}`;
  // Any answer means it serves (the floor worker has no /health).
  await waitFor(async () => (await fetch(`${url}/health`)).status < 500, 60_000, 100);
  return {
    url,
    stop: () => {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
    },
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
