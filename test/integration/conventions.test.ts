import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createUser, expectError, json } from "../helpers/api";

describe("GET /health", () => {
  it("answers without credentials", async () => {
    const response = await call("/health");
    expect(response.status).toBe(200);
    expect(await json(response)).toEqual({ status: "ok" });
  });
});

describe("conventions", () => {
  it("puts a request id on every answer, and keeps a sane one the caller sent", async () => {
    const generated = await call("/health");
    expect(generated.headers.get("X-Request-Id")).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await call("/api/v1/nowhere", { headers: { "X-Request-Id": "trace-123" } });
    expect(echoed.headers.get("X-Request-Id")).toBe("trace-123");
    const replaced = await call("/health", { headers: { "X-Request-Id": "bad id with spaces" } });
    expect(replaced.headers.get("X-Request-Id")).not.toBe("bad id with spaces");
  });

  it("answers 404 ROUTE_NOT_FOUND in the envelope for an unknown route", async () => {
    await expectError(await call("/api/v1/does-not-exist"), 404, "ROUTE_NOT_FOUND");
    await expectError(await call("/nowhere"), 404, "ROUTE_NOT_FOUND");
  });

  it("answers 405 with Allow for a known path and the wrong method", async () => {
    const user = await createUser();
    const response = await call("/api/v1/sandbox-specs/search", { method: "DELETE", key: user.key });
    expect(response.headers.get("Allow")).toBe("GET, HEAD");
    await expectError(response, 405, "METHOD_NOT_ALLOWED");
    const withParam = await call("/api/v1/api-keys/abc", { method: "GET", key: user.key });
    expect(withParam.headers.get("Allow")).toBe("DELETE");
    await expectError(withParam, 405, "METHOD_NOT_ALLOWED");
  });

  it("answers 400 MALFORMED_JSON for a body that is not JSON", async () => {
    const user = await createUser();
    const response = await call("/api/v1/api-keys", {
      method: "POST",
      key: user.key,
      rawBody: '{"name": ',
      headers: { "Content-Type": "application/json" },
    });
    await expectError(response, 400, "MALFORMED_JSON");
  });

  it("answers 415 for a body that is not declared as JSON", async () => {
    const user = await createUser();
    const response = await call("/api/v1/api-keys", {
      method: "POST",
      key: user.key,
      rawBody: "name=x",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    await expectError(response, 415, "UNSUPPORTED_MEDIA_TYPE");
    const missing = await call("/api/v1/api-keys", { method: "POST", key: user.key, rawBody: "{}" });
    await expectError(missing, 415, "UNSUPPORTED_MEDIA_TYPE");
  });

  it("answers 413 for a body over the limit, declared or streamed", async () => {
    const user = await createUser();
    const big = JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) });
    await expectError(
      await call("/api/v1/api-keys", {
        method: "POST",
        key: user.key,
        rawBody: big,
        headers: { "Content-Type": "application/json" },
      }),
      413,
      "PAYLOAD_TOO_LARGE",
    );

    const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 40) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const streamed = await exports.default.fetch(
      new Request("http://api.test/api/v1/api-keys", {
        method: "POST",
        headers: { Authorization: `Bearer ${user.key}`, "Content-Type": "application/json" },
        body: stream,
      }),
    );
    await expectError(streamed, 413, "PAYLOAD_TOO_LARGE");
  });

  it("answers 422 with FastAPI's list for a body of the wrong shape", async () => {
    const user = await createUser();
    const response = await call("/api/v1/api-keys", { method: "POST", key: user.key, body: { name: 42 } });
    const body = await expectError(response, 422, "VALIDATION_ERROR");
    expect(body.detail).toEqual([{ loc: ["body", "name"], msg: expect.any(String), type: "invalid_type" }]);
  });

  it("accepts a bodiless POST without a content type", async () => {
    const user = await createUser();
    const response = await call("/api/v1/api-keys", { method: "POST", key: user.key });
    expect(response.status).toBe(201);
    expect((await json<{ name: string }>(response)).name).toBe("default");
  });
});

describe("422 details", () => {
  it("say 'missing' for an absent field", async () => {
    const response = await call("/api/v1/admin/users", { method: "POST", key: ADMIN_TOKEN, body: {} });
    const body = await expectError(response, 422, "VALIDATION_ERROR");
    expect(body.detail).toEqual([{ loc: ["body", "name"], msg: expect.any(String), type: "missing" }]);
  });
});
