import { validationError } from "../errors";
import { base64UrlToBytes, bytesToBase64Url } from "./base64url";

/**
 * Keyset cursors. A `page_id` is an opaque, URL-safe encoding of the sort key of the last row
 * of the previous page; the next page starts strictly after it, so a page costs O(limit) and
 * rows added between pages are neither skipped nor repeated.
 */
export type CursorKey = (string | number)[];

const CURSOR_VERSION = 1;

function toBase64Url(text: string): string {
  return bytesToBase64Url(new TextEncoder().encode(text));
}

function fromBase64Url(text: string): string | null {
  if (text === "") return null;
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(base64UrlToBytes(text));
  } catch {
    return null;
  }
}

export function encodeCursor(key: CursorKey): string {
  return toBase64Url(JSON.stringify({ v: CURSOR_VERSION, k: key }));
}

/**
 * Decodes a `page_id` whose key must have `arity` parts of the given kinds.
 * Throws a 422 naming `page_id` for anything that this API did not write.
 */
export function decodeCursor(pageId: string, kinds: ("string" | "number")[]): CursorKey {
  const invalid = () => validationError(["query", "page_id"], "page_id is not a valid page cursor", "value_error.page_id");
  const text = fromBase64Url(pageId);
  if (text === null) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid();
  }
  if (typeof parsed !== "object" || parsed === null) throw invalid();
  const { v, k } = parsed as { v?: unknown; k?: unknown };
  if (v !== CURSOR_VERSION || !Array.isArray(k) || k.length !== kinds.length) throw invalid();
  const key: CursorKey = [];
  for (const [i, kind] of kinds.entries()) {
    const part: unknown = k[i];
    if (kind === "number" ? typeof part !== "number" || !Number.isFinite(part) : typeof part !== "string") throw invalid();
    key.push(part as string | number);
  }
  return key;
}

export interface Page<T> {
  items: T[];
  next_page_id: string | null;
}

/**
 * Pages a list that is already in its sort order, keyed by each item's position.
 * For small, fixed lists (configuration presets); stored collections page in SQL instead.
 */
export function pageByPosition<T>(all: readonly T[], limit: number, pageId: string | undefined): Page<T> {
  const start = pageId === undefined ? 0 : Number(decodeCursor(pageId, ["number"])[0]) + 1;
  if (!Number.isSafeInteger(start) || start < 0) {
    throw validationError(["query", "page_id"], "page_id is not a valid page cursor", "value_error.page_id");
  }
  const items = all.slice(start, start + limit);
  const last = start + items.length - 1;
  return { items, next_page_id: last + 1 < all.length ? encodeCursor([last]) : null };
}
