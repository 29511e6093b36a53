import type { AppConfig } from "../config";
import type { StartProgress } from "../durable-objects/conversation-do";
import { ApiError } from "../errors";
import { RuntimeCallError, RuntimeClient } from "../sandbox/runtime-client";
import { readProviderToken } from "../services/provider-token-service";
import { resumeSandbox, sandboxOf, startSandbox } from "../services/sandbox-service";
import { accountOf } from "../services/user-service";
import { type ConversationRecord, emptyMetrics, type StartPlan, type StartTaskStatus } from "./types";
import { initWorkspace, installGitHooks, prepareRepository, runSetupScript, SetupError } from "./workspace-setup";

export interface StepOutcome {
  next: StartTaskStatus;
  progress?: StartProgress;
  appConversationId?: string;
}

/** What a step may ask of the ConversationDO that drives it. */
export interface StepHooks {
  taskCreatedAt: string;
  setSandbox(id: string): void;
  createConversation(record: ConversationRecord): ConversationRecord;
}

/** How often a start polls its sandbox while it comes up. */
const SANDBOX_POLL_MS = 100;

/** The whole start's deadline: every step's own timeout, plus room for the fast steps. */
export function startTimeoutMs(config: AppConfig): number {
  return (config.sandboxStartTimeoutSeconds + config.gitCloneTimeoutSeconds + config.setupScriptTimeoutSeconds + 120) * 1000;
}

/** The branch a conversation works on when the request names none. */
export function workBranchName(conversationId: string): string {
  return `agent/${conversationId.slice(0, 8)}`;
}

/**
 * Runs the work of the step the task is in and says which status follows. Every step can run
 * twice (after an eviction) without harm: sandbox ids are fixed up front, the clone lands by
 * rename, hooks are overwritten, and the conversation is written once.
 */
export async function runStartStep(
  env: Env,
  config: AppConfig,
  status: StartTaskStatus,
  plan: StartPlan,
  progress: StartProgress,
  sandboxId: string | null,
  hooks: StepHooks,
): Promise<StepOutcome> {
  const runtime = () => new RuntimeClient(env, sandboxId ?? "", plan.user_id);
  switch (status) {
    case "WORKING":
      return { next: "WAITING_FOR_SANDBOX" };
    case "WAITING_FOR_SANDBOX": {
      const id = await ensureSandbox(env, config, plan);
      hooks.setSandbox(id);
      await waitUntilRunning(env, plan.user_id, id, config.sandboxStartTimeoutSeconds * 1000 + 5_000);
      return { next: "PREPARING_REPOSITORY" };
    }
    case "PREPARING_REPOSITORY": {
      if (plan.selected_repository === null) {
        const { dir, branch } = await initWorkspace(runtime());
        return { next: "RUNNING_SETUP_SCRIPT", progress: { workspace_dir: dir, branch } };
      }
      const provider = plan.git_provider ?? "github";
      const { dir, branch } = await prepareRepository(runtime(), {
        repository: plan.selected_repository,
        provider,
        baseUrl: config.gitBaseUrls[provider],
        branch: plan.selected_branch,
        token: await readProviderToken(env, plan.user_id, provider),
        workBranch: workBranchName(plan.conversation_id),
        cloneTimeoutMs: config.gitCloneTimeoutSeconds * 1000,
      });
      return { next: "RUNNING_SETUP_SCRIPT", progress: { workspace_dir: dir, branch } };
    }
    case "RUNNING_SETUP_SCRIPT": {
      const result = await runSetupScript(runtime(), progress.workspace_dir ?? ".", config.setupScriptTimeoutSeconds * 1000);
      return { next: "SETTING_UP_GIT_HOOKS", progress: { setup_script: result } };
    }
    case "SETTING_UP_GIT_HOOKS": {
      const installed = await installGitHooks(runtime(), progress.workspace_dir ?? ".");
      return { next: "STARTING_CONVERSATION", progress: { hook_installed: installed } };
    }
    case "STARTING_CONVERSATION": {
      const now = new Date().toISOString();
      const record = hooks.createConversation({
        id: plan.conversation_id,
        created_by_user_id: plan.user_id,
        sandbox_id: sandboxId ?? "",
        selected_repository: plan.selected_repository,
        selected_branch: progress.branch ?? plan.selected_branch,
        git_provider: plan.selected_repository === null ? plan.git_provider : (plan.git_provider ?? "github"),
        title: plan.title,
        trigger: plan.trigger,
        pr_number: plan.pr_number,
        llm_model: plan.llm_model,
        agent_type: plan.agent_type,
        parent_conversation_id: plan.parent_conversation_id,
        workspace_dir: progress.workspace_dir ?? ".",
        execution_status: "idle",
        metrics: emptyMetrics(),
        created_at: now,
        updated_at: now,
      });
      const account = accountOf(env, plan.user_id);
      await account.indexConversation({
        id: record.id,
        title: record.title,
        sandbox_id: record.sandbox_id,
        parent_id: record.parent_conversation_id,
        created_at: record.created_at,
        updated_at: record.updated_at,
      });
      await account.indexStartTask({
        id: plan.task_id,
        conversation_id: plan.conversation_id,
        app_conversation_id: record.id,
        created_at: hooks.taskCreatedAt,
      });
      return { next: "READY", appConversationId: record.id };
    }
    default:
      return { next: status };
  }
}

/** The sandbox the conversation runs in: the given one (resumed when needed) or a new one. */
async function ensureSandbox(env: Env, config: AppConfig, plan: StartPlan): Promise<string> {
  const id = plan.sandbox_id ?? plan.new_sandbox_id;
  const record = await sandboxOf(env, id).get();
  try {
    if (record === null && plan.sandbox_id === null) {
      await startSandbox(env, config, plan.user_id, undefined, id);
      return id;
    }
    if (record === null || record.user_id !== plan.user_id) throw new SetupError(`The sandbox ${id} no longer exists.`);
    if (record.status === "PAUSED" || record.status === "ERROR") await resumeSandbox(env, config, plan.user_id, id);
    return id;
  } catch (error) {
    if (error instanceof ApiError && typeof error.detail === "string") throw new SetupError(error.detail);
    throw error;
  }
}

async function waitUntilRunning(env: Env, userId: string, id: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const sandbox = sandboxOf(env, id);
  for (;;) {
    const record = await sandbox.get();
    if (record === null || record.user_id !== userId)
      throw new SetupError(`The sandbox ${id} was deleted while the conversation was starting.`);
    if (record.status === "RUNNING") return;
    if (record.status === "ERROR")
      throw new SetupError(`The sandbox failed to start: ${record.status_detail ?? "no reason given"}`);
    if (record.status === "PAUSED") {
      throw new SetupError(`The sandbox ${id} was paused while the conversation was starting; resume it and start again.`);
    }
    if (Date.now() >= deadline)
      throw new SetupError(`The sandbox did not become RUNNING within ${Math.round(timeoutMs / 1000)} s.`);
    await new Promise((resolve) => setTimeout(resolve, SANDBOX_POLL_MS));
  }
}

/** The task's `detail` for a failed step; `expected` failures need no log line. */
export function describeStartFailure(
  status: StartTaskStatus,
  error: unknown,
): { detail: string; expected: boolean; logged: string } {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof SetupError) return { detail: message, expected: true, logged: message };
  if (error instanceof RuntimeCallError) {
    return { detail: `${message} (while ${STEP_WORDS[status]}).`, expected: true, logged: message };
  }
  return {
    detail: `The start failed unexpectedly while ${STEP_WORDS[status]}; start the conversation again.`,
    expected: false,
    logged: error instanceof Error ? (error.stack ?? message) : message,
  };
}

export const STEP_WORDS: Record<StartTaskStatus, string> = {
  WORKING: "accepting the request",
  WAITING_FOR_SANDBOX: "waiting for the sandbox",
  PREPARING_REPOSITORY: "preparing the repository",
  RUNNING_SETUP_SCRIPT: "running the setup script",
  SETTING_UP_GIT_HOOKS: "setting up git hooks",
  STARTING_CONVERSATION: "starting the conversation",
  READY: "ready",
  ERROR: "failed",
};
