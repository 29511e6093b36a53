import type { IncomingMessage, ServerResponse } from "node:http";

/** A failure the runtime answers with a status and `{"detail", "code"}`, like the platform API. */
export class RuntimeError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, detail: string) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

/** Reads the whole body, refusing past `limit` bytes with a 413. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? Number.NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new RuntimeError(413, "TOO_LARGE", `Body of ${declared} bytes exceeds the limit of ${limit} bytes.`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume();
      throw new RuntimeError(413, "TOO_LARGE", `Body exceeds the limit of ${limit} bytes.`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export async function readJson<T>(req: IncomingMessage, limit = 4 * 1024 * 1024): Promise<T> {
  const body = await readBody(req, limit);
  try {
    return JSON.parse(body.length === 0 ? "{}" : body.toString("utf8")) as T;
  } catch {
    throw new RuntimeError(400, "MALFORMED_JSON", "The request body is not valid JSON.");
  }
}

export function requireString(value: unknown, name: string): string {
  if (typeof value !== "string" || value.length === 0)
    throw new RuntimeError(422, "VALIDATION_ERROR", `'${name}' must be a non-empty string.`);
  return value;
}

export function optionalNumber(value: unknown, name: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    throw new RuntimeError(422, "VALIDATION_ERROR", `'${name}' must be a number from ${min} to ${max}.`);
  }
  return value;
}

export function optionalEnv(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value))
    throw new RuntimeError(422, "VALIDATION_ERROR", "'env' must be an object of strings.");
  const env: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== "string") throw new RuntimeError(422, "VALIDATION_ERROR", `'env.${key}' must be a string.`);
    env[key] = item;
  }
  return env;
}
