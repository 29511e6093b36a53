/**
 * `npm start`: the whole service on http://localhost:8787 (PORT overrides), in single-user mode,
 * with local Durable Objects and R2 under .wrangler/state, and the local sandbox host running
 * sandboxes as processes under .sandboxes/. No Docker, no cloud account.
 * LLM_MODEL and LLM_BASE_URL are passed through from the environment; LLM_API_KEY is a secret
 * that wrangler reads from the environment or `.dev.vars`.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startSandboxHost } from "./sandbox-host.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const port = process.env.PORT ?? "8787";
const host = await startSandboxHost({ root: join(root, ".sandboxes"), port: Number(process.env.SANDBOX_HOST_PORT ?? 0) });
console.log(`local sandbox host on ${host.url}`);

const args = [
  "dev",
  "--port",
  port,
  "--var",
  "AUTH_MODE:single-user",
  "--var",
  `LOCAL_SANDBOX_HOST_URL:${host.url}`,
  "--show-interactive-dev-session=false",
];
for (const name of ["LLM_MODEL", "LLM_BASE_URL"]) {
  const value = process.env[name];
  if (value) args.push("--var", `${name}:${value}`);
}

const wrangler = spawn(join(root, "node_modules", ".bin", "wrangler"), args, { cwd: root, stdio: "inherit" });
const shutdown = (signal: NodeJS.Signals) => {
  wrangler.kill(signal);
};
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => shutdown(signal));
wrangler.on("exit", (code) => {
  void host.close().then(() => process.exit(code ?? 0));
});
