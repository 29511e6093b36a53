/**
 * `npm start`: the whole service on http://localhost:8787 (PORT overrides), in single-user mode,
 * with local Durable Objects and R2 under .wrangler/state, and the local sandbox host running
 * sandboxes as processes under .sandboxes/. No Docker, no cloud account.
 * LLM_MODEL, LLM_BASE_URL and the git providers' base URLs are passed through from the
 * environment; LLM_API_KEY is a secret that wrangler reads from the environment or `.dev.vars`.
 * PROVIDER_TOKEN_KEY (which encrypts stored git tokens) defaults to a random key made once and
 * kept in .wrangler/, so that tokens stored locally still decrypt after a restart.
 */
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startSandboxHost } from "./sandbox-host.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const port = process.env.PORT ?? "8787";
// The web console the Worker serves at /.
execFileSync(join(root, "node_modules", ".bin", "vite"), ["build", "web", "--logLevel", "warn"], { cwd: root, stdio: "inherit" });
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
for (const name of ["LLM_MODEL", "LLM_BASE_URL", "GITHUB_BASE_URL", "GITLAB_BASE_URL", "BITBUCKET_BASE_URL"]) {
  const value = process.env[name];
  if (value) args.push("--var", `${name}:${value}`);
}

/** The local encryption key for stored git tokens: made once, then reused. */
function localProviderTokenKey(): string {
  const file = join(root, ".wrangler", "local-provider-token-key");
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, randomBytes(32).toString("hex"), { mode: 0o600 });
  }
  return readFileSync(file, "utf8").trim();
}

// Secrets reach wrangler through its environment, which it reads like .dev.vars.
const env = { ...process.env, PROVIDER_TOKEN_KEY: process.env.PROVIDER_TOKEN_KEY ?? localProviderTokenKey() };
const wrangler = spawn(join(root, "node_modules", ".bin", "wrangler"), args, { cwd: root, stdio: "inherit", env });
const shutdown = (signal: NodeJS.Signals) => {
  wrangler.kill(signal);
};
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => shutdown(signal));
wrangler.on("exit", (code) => {
  void host.close().then(() => process.exit(code ?? 0));
});
