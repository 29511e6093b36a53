import { describe, expect, it } from "vitest";
import { expectError, json } from "../helpers/api";
import { callWith } from "../helpers/configured";

describe("single-user mode (AUTH_MODE=single-user)", () => {
  it("treats every request as the local user, without a key", async () => {
    const response = await callWith({ AUTH_MODE: "single-user" }, "/api/v1/users/me");
    expect(response.status).toBe(200);
    expect(await json(response)).toEqual({ id: "local", name: "Local user", email: null, created_at: expect.any(String) });
  });

  it("is off for any other value: a typo never opens the API", async () => {
    await expectError(await callWith({ AUTH_MODE: "single_user" }, "/api/v1/users/me"), 401, "AUTH_REQUIRED");
    await expectError(await callWith({ AUTH_MODE: "" }, "/api/v1/users/me"), 401, "AUTH_REQUIRED");
  });
});

describe("ADMIN_TOKEN unset", () => {
  it("disables the operator routes with 403", async () => {
    const response = await callWith({ ADMIN_TOKEN: "" }, "/api/v1/admin/users", {
      method: "POST",
      headers: { Authorization: "Bearer ", "Content-Type": "application/json" },
      body: JSON.stringify({ name: "x" }),
    });
    await expectError(response, 403, "ADMIN_DISABLED");
  });
});

describe("MAX_BODY_BYTES", () => {
  it("is the body limit", async () => {
    const response = await callWith({ AUTH_MODE: "single-user", MAX_BODY_BYTES: "64" }, "/api/v1/api-keys", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "y".repeat(80) }),
    });
    await expectError(response, 413, "PAYLOAD_TOO_LARGE");
  });
});
