import type { GitProvider } from "../config";

export const START_TASK_STATUSES = [
  "WORKING",
  "WAITING_FOR_SANDBOX",
  "PREPARING_REPOSITORY",
  "RUNNING_SETUP_SCRIPT",
  "SETTING_UP_GIT_HOOKS",
  "STARTING_CONVERSATION",
  "READY",
  "ERROR",
] as const;
export type StartTaskStatus = (typeof START_TASK_STATUSES)[number];

export const EXECUTION_STATUSES = [
  "idle",
  "running",
  "paused",
  "waiting_for_confirmation",
  "finished",
  "error",
  "stuck",
] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

export type AgentType = "default" | "plan";

export type MessageContent = { type: "text"; text: string } | { type: "image"; image_urls: string[] };

export interface SendMessage {
  role: "user";
  content: MessageContent[];
  run?: boolean | undefined;
}

/** `AppConversationStartRequest` as validated (CONTRACT.md). */
export interface StartRequestData {
  sandbox_id?: string | null | undefined;
  initial_message?: SendMessage | null | undefined;
  llm_model?: string | null | undefined;
  selected_repository?: string | null | undefined;
  selected_branch?: string | null | undefined;
  git_provider?: GitProvider | null | undefined;
  title?: string | null | undefined;
  trigger?: string | null | undefined;
  pr_number?: number[] | null | undefined;
  agent_type?: AgentType | null | undefined;
  parent_conversation_id?: string | null | undefined;
}

/**
 * What a start does, decided by the Worker when it accepts the request: the request's fields
 * with the parent's inherited where unset, the title, and the ids it will create.
 */
export interface StartPlan {
  task_id: string;
  conversation_id: string;
  user_id: string;
  created_at: string;
  /** The start request as the caller sent it (validated), returned as the task's `request`. */
  request: StartRequestData;
  /** An existing sandbox to use (resumed when PAUSED), or null for a new one. */
  sandbox_id: string | null;
  /** The id a new sandbox gets, fixed up front so that a start driven twice creates one. */
  new_sandbox_id: string;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: GitProvider | null;
  title: string;
  trigger: string | null;
  pr_number: number[];
  llm_model: string | null;
  agent_type: AgentType;
  parent_conversation_id: string | null;
  initial_message: SendMessage | null;
}

export interface StartTaskRecord {
  id: string;
  created_by_user_id: string;
  status: StartTaskStatus;
  detail: string | null;
  app_conversation_id: string | null;
  sandbox_id: string | null;
  request: StartRequestData;
  created_at: string;
  updated_at: string;
}

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
}

export interface Metrics {
  accumulated_cost: number;
  max_budget_per_task: number | null;
  accumulated_token_usage: TokenUsage;
}

/** A conversation as its object stores it; the service adds the live sandbox fields. */
export interface ConversationRecord {
  id: string;
  created_by_user_id: string;
  sandbox_id: string;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: GitProvider | null;
  title: string;
  trigger: string | null;
  pr_number: number[];
  llm_model: string | null;
  agent_type: AgentType;
  parent_conversation_id: string | null;
  /** The working copy, relative to the sandbox's working directory ("." without a repository). */
  workspace_dir: string;
  execution_status: ExecutionStatus;
  metrics: Metrics;
  created_at: string;
  updated_at: string;
}

export type EventSource = "agent" | "user" | "environment";

/** An event as the API shows it: the common fields plus those of its kind. */
export interface ConversationEvent {
  id: string;
  timestamp: string;
  source: EventSource;
  kind: string;
  [field: string]: unknown;
}

export function emptyMetrics(): Metrics {
  return {
    accumulated_cost: 0,
    max_budget_per_task: null,
    accumulated_token_usage: {
      prompt_tokens: 0,
      completion_tokens: 0,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
    },
  };
}
