import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppConfig } from "../config";
import { ApiError, type ValidationIssue } from "../errors";

export interface AppEnv {
  Bindings: Env;
  Variables: {
    requestId: string;
    config: AppConfig;
    /** The authenticated caller; set by `requireUser` on every authenticated route. */
    userId: string;
  };
}

const LOCATIONS: Record<string, string> = { json: "body", query: "query", param: "path", header: "header" };

interface ZodIssueLike {
  code: string;
  path: PropertyKey[];
  message: string;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let value = root;
  for (const part of path) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[part];
  }
  return value;
}

/**
 * Turns zod issues into FastAPI's 422 list: `loc` starts with body/query/path/header, and an
 * absent field is type `missing` as FastAPI says it. `input` is what was validated.
 */
export function toValidationIssues(target: string, issues: readonly ZodIssueLike[], input: unknown): ValidationIssue[] {
  const where = LOCATIONS[target] ?? target;
  return issues.map((issue) => ({
    loc: [where, ...issue.path.map((part) => (typeof part === "number" ? part : String(part)))],
    msg: issue.message,
    type: issue.code === "invalid_type" && valueAt(input, issue.path) === undefined ? "missing" : issue.code,
  }));
}

async function validatedInput(c: Context<AppEnv>, target: string): Promise<unknown> {
  switch (target) {
    case "json":
      // Already parsed by the validator; Hono caches the body.
      return c.req.json().catch(() => undefined);
    case "query":
      return c.req.queries();
    case "param":
      return c.req.param();
    default:
      return undefined;
  }
}

/** A router whose schema failures become the standard 422 envelope. */
export function newRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({
    defaultHook: async (result, c) => {
      if (result.success) return;
      const input = await validatedInput(c, result.target);
      throw new ApiError("VALIDATION_ERROR", toValidationIssues(result.target, result.error.issues, input));
    },
  });
}
