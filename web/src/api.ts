/** The console's only way to the platform: the public /api/v1 API, same origin. */

const KEY_STORAGE = "agent-platform.api-key";

export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
}

/** An error answer of the API; `message` is its `detail` as a sentence. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: unknown,
  ) {
    super(ApiError.describe(detail, status));
    this.name = "ApiError";
  }

  static describe(detail: unknown, status: number): string {
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return (detail as ValidationIssue[])
        .map((issue) => `${issue.loc.slice(1).join(".") || issue.loc.join(".")}: ${issue.msg}`)
        .join("; ");
    }
    return `The request failed (HTTP ${status}).`;
  }
}

/** The API key lives in this browser session only (never in a URL the server logs, never on disk). */
export const apiKey = {
  get: (): string | null => sessionStorage.getItem(KEY_STORAGE),
  set: (key: string) => sessionStorage.setItem(KEY_STORAGE, key),
  clear: () => sessionStorage.removeItem(KEY_STORAGE),
};

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  const key = apiKey.get();
  if (key !== null) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(`/api/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, "NETWORK_ERROR", "The platform could not be reached; check your connection and try again.");
  }
  const text = await response.text();
  const parsed = text === "" ? null : (JSON.parse(text) as unknown);
  if (!response.ok) {
    const error = (parsed ?? {}) as { code?: string; detail?: unknown };
    throw new ApiError(response.status, error.code ?? "UNKNOWN", error.detail);
  }
  return parsed as T;
}

export function query(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(name, String(value));
  }
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}

export interface Page<T> {
  items: T[];
  next_page_id: string | null;
}

export interface Metrics {
  accumulated_cost: number;
  accumulated_token_usage: { prompt_tokens: number; completion_tokens: number };
}

export interface Conversation {
  id: string;
  title: string;
  sandbox_id: string;
  selected_repository: string | null;
  selected_branch: string | null;
  llm_model: string | null;
  execution_status: string;
  sandbox_status: string;
  metrics: Metrics;
  created_at: string;
  updated_at: string;
}

export interface StartTask {
  id: string;
  status: string;
  detail: string | null;
  app_conversation_id: string | null;
  sandbox_id: string | null;
}

export interface Sandbox {
  id: string;
  sandbox_spec_id: string;
  status: string;
  created_at: string;
}

export interface SandboxSpec {
  id: string;
  working_dir: string;
}

export interface AgentEvent {
  id: string;
  timestamp: string;
  source: string;
  kind: string;
  [field: string]: unknown;
}

/** The event socket's URL; the key goes as a query parameter because browsers cannot set socket headers. */
export function eventSocketUrl(conversationId: string, after: number | null): string {
  const url = new URL(`/api/v1/app-conversations/${conversationId}/events/socket`, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  if (after === null) url.searchParams.set("resend_all", "true");
  else url.searchParams.set("after", String(after));
  const key = apiKey.get();
  if (key !== null) url.searchParams.set("session_api_key", key);
  return url.toString();
}
