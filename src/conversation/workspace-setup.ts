import type { GitProvider } from "../config";
import type { ExecResult, RuntimeClient } from "../sandbox/runtime-client";

/**
 * The repository steps of a conversation's start, run in its sandbox through the runtime:
 * clone (or `git init`), check out a branch, run the setup script, install the pre-commit hook.
 * A failure a user can fix is a `SetupError` whose message says what to do; the git token is
 * never in any message, file, or environment that outlives the one command that needs it.
 */
export class SetupError extends Error {
  constructor(detail: string) {
    super(detail);
    this.name = "SetupError";
  }
}

/** HTTP basic-auth user names that each provider expects beside a token. */
const TOKEN_USER: Record<GitProvider, string> = {
  github: "x-access-token",
  gitlab: "oauth2",
  bitbucket: "x-token-auth",
};

const AGENT_IDENTITY = { name: "Agent Platform", email: "agent@agent-platform.invalid" };

export interface RepositoryInput {
  repository: string;
  provider: GitProvider;
  baseUrl: string;
  branch: string | null;
  /** The user's token for the provider, or null to try without one (a public repository). */
  token: string | null;
  /** The branch created when `branch` is null. */
  workBranch: string;
  cloneTimeoutMs: number;
}

export interface SetupScriptResult {
  command: string;
  output: string;
  exit_code: number | null;
  timed_out: boolean;
}

/** The working copy's directory, relative to the sandbox's working directory. */
export function repositoryDirectory(repository: string): string {
  return repository.split("/").at(-1) ?? repository;
}

function basicAuth(provider: GitProvider, token: string): string {
  const bytes = new TextEncoder().encode(`${TOKEN_USER[provider]}:${token}`);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return `Basic ${btoa(binary)}`;
}

/** Removes every form of the token from text that may reach a user. */
function redact(text: string, secrets: string[]): string {
  let clean = text;
  for (const secret of secrets) if (secret.length > 0) clean = clean.replaceAll(secret, "***");
  return clean;
}

function lastLines(text: string, count: number): string {
  return text.trim().split("\n").slice(-count).join(" ").slice(0, 500);
}

async function git(runtime: RuntimeClient, args: string[], cwd: string, timeoutMs = 60_000): Promise<ExecResult> {
  return runtime.exec({ argv: ["git", ...args], cwd, timeout_ms: timeoutMs, env: { GIT_TERMINAL_PROMPT: "0" } });
}

async function mustGit(runtime: RuntimeClient, args: string[], cwd: string, what: string): Promise<ExecResult> {
  const result = await git(runtime, args, cwd);
  if (result.exit_code !== 0) throw new SetupError(`${what} failed: ${lastLines(result.stderr || result.stdout, 3)}`);
  return result;
}

async function configureIdentity(runtime: RuntimeClient, dir: string): Promise<void> {
  await mustGit(runtime, ["config", "user.name", AGENT_IDENTITY.name], dir, "Setting the git identity");
  await mustGit(runtime, ["config", "user.email", AGENT_IDENTITY.email], dir, "Setting the git identity");
}

async function currentBranch(runtime: RuntimeClient, dir: string): Promise<string | null> {
  const result = await git(runtime, ["symbolic-ref", "--quiet", "--short", "HEAD"], dir);
  return result.exit_code === 0 ? result.stdout.trim() : null;
}

/** No repository: the working directory becomes a git repository (once). */
export async function initWorkspace(runtime: RuntimeClient): Promise<{ dir: string; branch: string | null }> {
  if ((await runtime.stat(".git")) === null)
    await mustGit(runtime, ["init", "--quiet", "--initial-branch=main"], ".", "git init");
  await configureIdentity(runtime, ".");
  return { dir: ".", branch: await currentBranch(runtime, ".") };
}

/**
 * Clones the repository into its directory, or reuses the working copy already there (a
 * sandbox shared with a parent conversation). Clones into a temporary directory and renames it,
 * so that a start interrupted mid-clone and driven again starts clean.
 */
export async function prepareRepository(
  runtime: RuntimeClient,
  input: RepositoryInput,
): Promise<{ dir: string; branch: string }> {
  const dir = repositoryDirectory(input.repository);
  if ((await runtime.stat(`${dir}/.git`)) === null) await clone(runtime, input, dir);
  else if (input.branch !== null && (await currentBranch(runtime, dir)) !== input.branch) {
    const checkout = await git(runtime, ["checkout", input.branch], dir);
    if (checkout.exit_code !== 0) {
      throw new SetupError(
        `The working copy of ${input.repository} in this sandbox has no branch '${input.branch}': ${lastLines(checkout.stderr, 2)}`,
      );
    }
  }
  await configureIdentity(runtime, dir);
  if (input.branch !== null) return { dir, branch: input.branch };
  const existing = await currentBranch(runtime, dir);
  if (existing === input.workBranch) return { dir, branch: existing };
  await mustGit(runtime, ["checkout", "-b", input.workBranch], dir, `Creating the work branch ${input.workBranch}`);
  return { dir, branch: input.workBranch };
}

async function clone(runtime: RuntimeClient, input: RepositoryInput, dir: string): Promise<void> {
  const url = `${input.baseUrl}/${input.repository}.git`;
  const staging = `.${dir}.cloning`;
  await runtime.exec({ argv: ["rm", "-rf", "--", staging], timeout_ms: 60_000 });
  const header = input.token === null ? null : `Authorization: ${basicAuth(input.provider, input.token)}`;
  // The token travels in this one command's environment as git configuration, so it is never
  // written to .git/config, to a credential file, or to the sandbox's own environment.
  const env: Record<string, string> = { GIT_TERMINAL_PROMPT: "0" };
  if (header !== null)
    Object.assign(env, { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "http.extraHeader", GIT_CONFIG_VALUE_0: header });
  const argv = ["git", "clone", "--quiet", "--no-progress"];
  if (input.branch !== null) argv.push("--branch", input.branch);
  argv.push("--", url, staging);
  const result = await runtime.exec({ argv, env, timeout_ms: input.cloneTimeoutMs });
  if (result.exit_code !== 0 || result.timed_out) {
    await runtime.exec({ argv: ["rm", "-rf", "--", staging], timeout_ms: 60_000 });
    const secrets = input.token === null || header === null ? [] : [input.token, header.slice("Authorization: ".length)];
    throw new SetupError(cloneFailure(input, result, redact(result.stderr, secrets)));
  }
  const move = await runtime.exec({ argv: ["mv", "--", staging, dir], timeout_ms: 60_000 });
  if (move.exit_code !== 0)
    throw new SetupError(`Could not move the clone of ${input.repository} into place: ${lastLines(move.stderr, 2)}`);
}

function cloneFailure(input: RepositoryInput, result: ExecResult, stderr: string): string {
  const where = `${input.repository} from ${input.baseUrl}`;
  const tokenRoute = `PUT /api/v1/users/me/provider-tokens/${input.provider}`;
  if (result.timed_out) return `Cloning ${where} did not finish within ${input.cloneTimeoutMs / 1000} s.`;
  if (/could not read Username|Authentication failed|returned error: 40[13]|terminal prompts disabled/i.test(stderr)) {
    return input.token === null
      ? `The git server refused to clone ${where}: it needs credentials, and you have no ${input.provider} token stored. Store one with ${tokenRoute}.`
      : `The git server refused to clone ${where} with your ${input.provider} token: check that the token is valid and can read the repository, and store a new one with ${tokenRoute}.`;
  }
  if (/Remote branch .* not found/i.test(stderr)) return `The branch '${input.branch}' does not exist in ${input.repository}.`;
  if (/not found|returned error: 404/i.test(stderr)) {
    return `${where} was not found: check the repository name, and that your ${input.provider} token can see it.`;
  }
  return `Cloning ${where} failed: ${lastLines(stderr, 3) || `git exited with ${result.exit_code}`}`;
}

/** Runs `.openhands/setup.sh` when the working copy has one; its outcome does not stop the start. */
export async function runSetupScript(runtime: RuntimeClient, dir: string, timeoutMs: number): Promise<SetupScriptResult | null> {
  if ((await runtime.stat(`${dir}/.openhands/setup.sh`)) === null) return null;
  const command = "bash .openhands/setup.sh";
  const result = await runtime.exec({ argv: ["bash", ".openhands/setup.sh"], cwd: dir, timeout_ms: timeoutMs });
  let output = result.stdout + result.stderr;
  if (result.stdout_truncated || result.stderr_truncated) output += "\n[output truncated]";
  if (result.timed_out) output += `\n[the setup script was stopped after ${timeoutMs / 1000} s]`;
  return { command, output, exit_code: result.exit_code, timed_out: result.timed_out };
}

const PRE_COMMIT_HOOK = `#!/bin/sh
# Installed by the agent platform: runs the repository's own pre-commit script.
exec bash "$(git rev-parse --show-toplevel)/.openhands/pre-commit.sh" "$@"
`;

/** Installs `.openhands/pre-commit.sh` as the pre-commit hook; true when there was one. */
export async function installGitHooks(runtime: RuntimeClient, dir: string): Promise<boolean> {
  if ((await runtime.stat(`${dir}/.openhands/pre-commit.sh`)) === null) return false;
  const hooks = await mustGit(runtime, ["rev-parse", "--git-path", "hooks"], dir, "Finding the hooks directory");
  const hooksDir = hooks.stdout.trim();
  const path = hooksDir.startsWith("/") ? `${hooksDir}/pre-commit` : `${dir}/${hooksDir}/pre-commit`;
  await runtime.writeFile(path, PRE_COMMIT_HOOK, "0755");
  return true;
}
