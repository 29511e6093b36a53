import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "../../errors";
import type { AppEnv } from "../app-env";
import { isRuntimeProxyPath } from "../runtime-proxy";

const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;
const METHODS_WITH_BODY = new Set(["POST", "PUT", "PATCH", "DELETE"]);

function hasBody(request: Request): boolean {
  const length = request.headers.get("Content-Length");
  if (length !== null) return length.trim() !== "0";
  return request.body !== null;
}

/**
 * The API takes JSON bodies only (415 otherwise) of at most `MAX_BODY_BYTES` (413 otherwise,
 * checked on the declared length and again while the body streams in). A request without a
 * body needs no content type. The runtime proxy is exempt: it carries the runtime's own bodies
 * (files, archives) under the runtime's own limits.
 */
export function jsonBodyGuard(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (!METHODS_WITH_BODY.has(c.req.method) || isRuntimeProxyPath(c.req.path) || !hasBody(c.req.raw)) return next();
    const mediaType = (c.req.header("Content-Type") ?? "").split(";")[0]?.trim() ?? "";
    if (!JSON_MEDIA_TYPE.test(mediaType)) {
      throw new ApiError(
        "UNSUPPORTED_MEDIA_TYPE",
        `Request bodies must be JSON (Content-Type: application/json); got ${mediaType === "" ? "no content type" : `'${mediaType.slice(0, 100)}'`}.`,
      );
    }
    const maxSize = c.var.config.maxBodyBytes;
    return bodyLimit({
      maxSize,
      onError: () => {
        throw new ApiError("PAYLOAD_TOO_LARGE", `Request body exceeds the limit of ${maxSize} bytes.`);
      },
    })(c, next);
  };
}
