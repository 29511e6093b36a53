/**
 * Typed view of the deployment's vars. Vars arrive as strings; a missing or malformed number
 * falls back to its safe default rather than failing every request.
 */
export type AuthMode = "api-key" | "single-user";

export type GitProvider = "github" | "gitlab" | "bitbucket";

export interface AppConfig {
  authMode: AuthMode;
  maxBodyBytes: number;
  maxRunningSandboxes: number;
  sandboxIdleTimeoutSeconds: number;
  sandboxStartTimeoutSeconds: number;
  gitCloneTimeoutSeconds: number;
  setupScriptTimeoutSeconds: number;
  /** Where each git provider's repositories are cloned from (`{base}/{owner}/{repo}.git`). */
  gitBaseUrls: Record<GitProvider, string>;
  /** The most steps an agent run takes before it stops in error. */
  agentMaxIterations: number;
  /** The model for conversations that do not name one; empty when none is configured. */
  llmModel: string;
  /** How often an idle Server-Sent Events stream gets a heartbeat comment. */
  eventStreamHeartbeatSeconds: number;
  /** Unsent bytes a live client may fall behind by before it is cut off (it resumes from its last id). */
  eventStreamClientBufferBytes: number;
}

/** The id of the one user of single-user (local development) mode. */
export const LOCAL_USER_ID = "local";

function positiveInt(raw: string | undefined, fallback: number): number {
  const value = positiveNumber(raw, fallback);
  return Number.isSafeInteger(value) ? value : fallback;
}

/** Durations may be fractional (tests use sub-second timeouts). */
function positiveNumber(raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

/** An http(s) base URL without a trailing slash; anything else falls back to the default. */
function baseUrl(raw: string | undefined, fallback: string): string {
  const value = raw?.trim() ?? "";
  if (!/^https?:\/\/[^\s]+$/.test(value)) return fallback;
  return value.replace(/\/+$/, "");
}

export function readConfig(env: Env): AppConfig {
  return {
    // Anything but the explicit local value means keys are required: a typo never opens the API.
    authMode: env.AUTH_MODE === "single-user" ? "single-user" : "api-key",
    maxBodyBytes: positiveInt(env.MAX_BODY_BYTES, 1024 * 1024),
    maxRunningSandboxes: positiveInt(env.MAX_RUNNING_SANDBOXES, 5),
    sandboxIdleTimeoutSeconds: positiveNumber(env.SANDBOX_IDLE_TIMEOUT_SECONDS, 1800),
    sandboxStartTimeoutSeconds: positiveNumber(env.SANDBOX_START_TIMEOUT_SECONDS, 120),
    gitCloneTimeoutSeconds: positiveNumber(env.GIT_CLONE_TIMEOUT_SECONDS, 600),
    setupScriptTimeoutSeconds: positiveNumber(env.SETUP_SCRIPT_TIMEOUT_SECONDS, 600),
    gitBaseUrls: {
      github: baseUrl(env.GITHUB_BASE_URL, "https://github.com"),
      gitlab: baseUrl(env.GITLAB_BASE_URL, "https://gitlab.com"),
      bitbucket: baseUrl(env.BITBUCKET_BASE_URL, "https://bitbucket.org"),
    },
    agentMaxIterations: positiveInt(env.AGENT_MAX_ITERATIONS, 500),
    llmModel: env.LLM_MODEL?.trim() ?? "",
    eventStreamHeartbeatSeconds: positiveNumber(env.EVENT_STREAM_HEARTBEAT_SECONDS, 15),
    eventStreamClientBufferBytes: positiveInt(env.EVENT_STREAM_CLIENT_BUFFER_BYTES, 4 * 1024 * 1024),
  };
}
