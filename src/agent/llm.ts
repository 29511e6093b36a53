import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { APICallError, generateText, type LanguageModel, type ModelMessage, RetryError, type ToolSet } from "ai";
import { createWorkersAI } from "workers-ai-provider";
import type { TokenUsage } from "../conversation/types";

/** One model turn: what it said, the tools it called, and what it cost. */
export interface LlmTurn {
  text: string;
  toolCalls: { id: string; name: string; input: unknown }[];
  usage: TokenUsage;
}

export interface LlmRequest {
  system: string;
  messages: ModelMessage[];
  tools: ToolSet;
}

/** The one seam between the agent loop and any model. */
export interface LlmProvider {
  readonly model: string;
  complete(request: LlmRequest): Promise<LlmTurn>;
}

/** A model failure the loop cannot retry its way out of; `detail` says what to fix. */
export class LlmError extends Error {
  constructor(
    readonly code: "LLM_NOT_CONFIGURED" | "LLM_AUTH_FAILED" | "LLM_MODEL_NOT_FOUND" | "LLM_BAD_REQUEST" | "LLM_UNAVAILABLE",
    readonly detail: string,
  ) {
    super(detail);
    this.name = "LlmError";
  }
}

/** Transient failures (429, 5xx, network) are retried this many times, honouring Retry-After. */
const MAX_RETRIES = 4;
const CALL_TIMEOUT_MS = 5 * 60_000;

interface LlmSettings {
  apiKey: string;
  baseUrl: string;
  ai: Ai | undefined;
}

/**
 * The language model for `model` (`provider/name`): `openai/…` (through `LLM_BASE_URL` when it
 * is set, any OpenAI-compatible server), `anthropic/…`, `workers-ai/@cf/…` (the `AI` binding).
 * Any other name goes to `LLM_BASE_URL` as it is.
 */
function languageModel(model: string, settings: LlmSettings): LanguageModel {
  const slash = model.indexOf("/");
  const provider = slash === -1 ? "" : model.slice(0, slash);
  const name = slash === -1 ? model : model.slice(slash + 1);
  if (provider === "workers-ai") {
    if (settings.ai === undefined) {
      throw new LlmError(
        "LLM_NOT_CONFIGURED",
        `The model '${model}' needs the Workers AI binding 'AI', which this deployment lacks.`,
      );
    }
    return createWorkersAI({ binding: settings.ai })(name);
  }
  if (settings.apiKey === "") {
    throw new LlmError("LLM_NOT_CONFIGURED", "No LLM API key is configured: the operator must set the LLM_API_KEY secret.");
  }
  if (provider === "anthropic") return createAnthropic({ apiKey: settings.apiKey })(name);
  if (settings.baseUrl !== "") {
    return createOpenAICompatible({
      name: "openai-compatible",
      baseURL: settings.baseUrl,
      apiKey: settings.apiKey,
      includeUsage: true,
    })(provider === "openai" ? name : model);
  }
  if (provider === "openai") return createOpenAI({ apiKey: settings.apiKey })(name);
  throw new LlmError(
    "LLM_NOT_CONFIGURED",
    `Unknown model provider in '${model}': use openai/…, anthropic/… or workers-ai/…, or set LLM_BASE_URL for an OpenAI-compatible server.`,
  );
}

function describeFailure(model: string, error: unknown): LlmError {
  const cause = RetryError.isInstance(error) ? error.lastError : error;
  if (APICallError.isInstance(cause)) {
    const status = cause.statusCode ?? 0;
    if (status === 401 || status === 403) {
      return new LlmError(
        "LLM_AUTH_FAILED",
        `The model provider rejected the API key (HTTP ${status}): check the LLM_API_KEY secret.`,
      );
    }
    if (status === 404) {
      return new LlmError(
        "LLM_MODEL_NOT_FOUND",
        `The model provider does not know the model '${model}' (HTTP 404): check llm_model or LLM_MODEL.`,
      );
    }
    if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
      return new LlmError(
        "LLM_BAD_REQUEST",
        `The model provider refused the request (HTTP ${status}): ${cause.message.slice(0, 300)}`,
      );
    }
    return new LlmError(
      "LLM_UNAVAILABLE",
      `The model provider kept failing (HTTP ${status || "no answer"}) after ${MAX_RETRIES} retries: ${cause.message.slice(0, 300)}. Run the conversation again later.`,
    );
  }
  const message = cause instanceof Error ? cause.message : String(cause);
  return new LlmError("LLM_UNAVAILABLE", `The model call failed: ${message.slice(0, 300)}. Run the conversation again later.`);
}

export function createLlmProvider(model: string, env: Env): LlmProvider {
  const settings: LlmSettings = {
    apiKey: env.LLM_API_KEY ?? "",
    baseUrl: (env.LLM_BASE_URL ?? "").trim().replace(/\/+$/, ""),
    ai: (env as unknown as { AI?: Ai }).AI,
  };
  return {
    model,
    async complete(request) {
      const resolved = languageModel(model, settings);
      // A timer of our own, cleared when the call ends, so that no timer outlives the call.
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(new Error(`no answer within ${CALL_TIMEOUT_MS / 1000} s`)), CALL_TIMEOUT_MS);
      try {
        const result = await generateText({
          model: resolved,
          system: request.system,
          messages: request.messages,
          tools: request.tools,
          maxRetries: MAX_RETRIES,
          abortSignal: abort.signal,
        });
        const usage = result.usage;
        return {
          text: result.text,
          toolCalls: result.toolCalls.map((call) => ({ id: call.toolCallId, name: call.toolName, input: call.input })),
          usage: {
            prompt_tokens: usage.inputTokens ?? 0,
            completion_tokens: usage.outputTokens ?? 0,
            cache_read_tokens: usage.inputTokenDetails?.cacheReadTokens ?? 0,
            cache_write_tokens: usage.inputTokenDetails?.cacheWriteTokens ?? 0,
            reasoning_tokens: usage.outputTokenDetails?.reasoningTokens ?? 0,
          },
        };
      } catch (error) {
        throw describeFailure(model, error);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
