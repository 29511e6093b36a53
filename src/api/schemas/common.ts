import { z } from "@hono/zod-openapi";

/** The standard error envelope; `detail` is a sentence, or FastAPI's list for a 422. */
export const ErrorSchema = z
  .object({
    detail: z.union([
      z.string(),
      z.array(
        z.object({
          loc: z.array(z.union([z.string(), z.number()])),
          msg: z.string(),
          type: z.string(),
        }),
      ),
    ]),
    code: z.string().openapi({ example: "VALIDATION_ERROR" }),
  })
  .openapi("Error");

/** An ISO-8601 instant with an offset, normalized to UTC (`...Z`) so it compares as stored times do. */
export const IsoInstantSchema = z.iso
  .datetime({ offset: true })
  .transform((value) => new Date(value).toISOString())
  .openapi({ type: "string", format: "date-time" });

export const SuccessSchema = z.object({ success: z.literal(true) }).openapi("Success");

export const MAX_PAGE_LIMIT = 100;
export const MAX_BATCH_IDS = 100;

export const PageQuerySchema = z.object({
  page_id: z
    .string()
    .min(1)
    .max(2048)
    .optional()
    .openapi({ description: "Opaque cursor from a previous page's `next_page_id`." }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_PAGE_LIMIT)
    .default(MAX_PAGE_LIMIT)
    .openapi({ type: "integer", minimum: 1, maximum: MAX_PAGE_LIMIT, default: MAX_PAGE_LIMIT }),
});

/** A page of `item`: `{items, next_page_id}`. */
export function pageSchema<T extends z.ZodType>(item: T, name: string) {
  return z.object({ items: z.array(item), next_page_id: z.string().nullable() }).openapi(name);
}

/**
 * A repeated query parameter (`?id=a&id=b`), 1 to 100 values. Hono hands a single value over as
 * a string and several as an array; both become an array here.
 */
export function batchIdsSchema(description: string) {
  return z
    .preprocess(
      (value) => (typeof value === "string" ? [value] : value),
      z.array(z.string().min(1).max(200)).min(1).max(MAX_BATCH_IDS),
    )
    .openapi({
      type: "array",
      items: { type: "string" },
      maxItems: MAX_BATCH_IDS,
      description,
    });
}

/** Error responses shared by every authenticated route, for the OpenAPI document. */
export function errorResponses(...statuses: (400 | 401 | 404 | 409 | 413 | 415 | 422 | 429)[]) {
  const descriptions: Record<number, string> = {
    400: "Malformed request",
    401: "Missing or invalid credentials",
    404: "Unknown, or not the caller's",
    409: "Wrong state",
    413: "Body too large",
    415: "Body is not JSON",
    422: "Invalid input",
    429: "Limit reached",
  };
  const responses: Record<string, { description: string; content: { "application/json": { schema: typeof ErrorSchema } } }> = {};
  for (const status of [401, 422, ...statuses]) {
    responses[String(status)] = {
      description: descriptions[status] ?? "Error",
      content: { "application/json": { schema: ErrorSchema } },
    };
  }
  return responses;
}

export function jsonContent<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { "application/json": { schema } } };
}
