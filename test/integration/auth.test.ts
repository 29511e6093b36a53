import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createUser, expectError, json } from "../helpers/api";

interface KeyPage {
  items: { id: string; name: string; prefix: string; created_at: string }[];
  next_page_id: string | null;
}

describe("authentication", () => {
  it("answers 401 AUTH_REQUIRED without a key", async () => {
    const response = await call("/api/v1/users/me");
    expect(response.headers.get("WWW-Authenticate")).toBe("Bearer");
    await expectError(response, 401, "AUTH_REQUIRED");
  });

  it("answers 401 INVALID_API_KEY for a wrong or malformed key", async () => {
    await expectError(await call("/api/v1/users/me", { key: `ohk_${"A".repeat(43)}` }), 401, "INVALID_API_KEY");
    await expectError(await call("/api/v1/users/me", { key: "not-a-key" }), 401, "INVALID_API_KEY");
    await expectError(
      await call("/api/v1/users/me", { headers: { Authorization: "Basic Zm9vOmJhcg==" } }),
      401,
      "INVALID_API_KEY",
    );
  });

  it("accepts the key as X-Session-API-Key too", async () => {
    const user = await createUser();
    const response = await call("/api/v1/users/me", { headers: { "X-Session-API-Key": user.key } });
    expect(response.status).toBe(200);
    expect((await json<{ id: string }>(response)).id).toBe(user.id);
  });
});

describe("GET /api/v1/users/me", () => {
  it("answers the caller", async () => {
    const user = await createUser("ada");
    const response = await call("/api/v1/users/me", { key: user.key });
    expect(response.status).toBe(200);
    expect(await json(response)).toEqual({ id: user.id, name: "ada", email: "ada@example.com", created_at: expect.any(String) });
  });
});

describe("/api/v1/api-keys", () => {
  it("creates a key that authenticates as its user and lists it without the secret", async () => {
    const user = await createUser();
    const created = await call("/api/v1/api-keys", { method: "POST", key: user.key, body: { name: "ci" } });
    expect(created.status).toBe(201);
    const key = await json<{ id: string; key: string; prefix: string; name: string }>(created);
    expect(key.key).toMatch(/^ohk_[0-9A-Za-z]{43}$/);
    expect(key.key.startsWith(key.prefix)).toBe(true);

    const me = await json<{ id: string }>(await call("/api/v1/users/me", { key: key.key }));
    expect(me.id).toBe(user.id);

    const listing = await call("/api/v1/api-keys", { key: user.key });
    const text = await listing.text();
    expect(text).not.toContain(key.key);
    expect(text).not.toContain(user.key);
    const page = JSON.parse(text) as KeyPage;
    expect(page.items.map((item) => item.id).sort()).toEqual([user.keyId, key.id].sort());
    expect(page.items.find((item) => item.id === key.id)?.name).toBe("ci");
  });

  it("pages keys newest first with a keyset cursor", async () => {
    const user = await createUser();
    for (let i = 0; i < 4; i++) await call("/api/v1/api-keys", { method: "POST", key: user.key, body: { name: `k${i}` } });
    const seen: string[] = [];
    let pageId: string | null = null;
    do {
      const query: string = pageId === null ? "limit=2" : `limit=2&page_id=${pageId}`;
      const page: KeyPage = await json<KeyPage>(await call(`/api/v1/api-keys?${query}`, { key: user.key }));
      expect(page.items.length).toBeLessThanOrEqual(2);
      seen.push(...page.items.map((item) => item.name));
      pageId = page.next_page_id;
    } while (pageId !== null);
    expect(seen).toEqual(["k3", "k2", "k1", "k0", "default"]);
  });

  it("revokes a key: it fails on the very next request", async () => {
    const user = await createUser();
    const second = await json<{ id: string; key: string }>(
      await call("/api/v1/api-keys", { method: "POST", key: user.key, body: {} }),
    );
    expect((await call("/api/v1/users/me", { key: second.key })).status).toBe(200);
    const revoked = await call(`/api/v1/api-keys/${second.id}`, { method: "DELETE", key: user.key });
    expect(revoked.status).toBe(200);
    expect(await json(revoked)).toEqual({ success: true });
    await expectError(await call("/api/v1/users/me", { key: second.key }), 401, "INVALID_API_KEY");
    await expectError(await call(`/api/v1/api-keys/${second.id}`, { method: "DELETE", key: user.key }), 404, "API_KEY_NOT_FOUND");
    expect((await call("/api/v1/users/me", { key: user.key })).status).toBe(200);
  });

  it("lets a user revoke the key they are using", async () => {
    const user = await createUser();
    expect((await call(`/api/v1/api-keys/${user.keyId}`, { method: "DELETE", key: user.key })).status).toBe(200);
    await expectError(await call("/api/v1/users/me", { key: user.key }), 401, "INVALID_API_KEY");
  });

  it("never shows or revokes another user's keys", async () => {
    const alice = await createUser();
    const bob = await createUser();
    const bobsKeys = await json<KeyPage>(await call("/api/v1/api-keys", { key: bob.key }));
    expect(bobsKeys.items.map((item) => item.id)).toEqual([bob.keyId]);
    await expectError(
      await call(`/api/v1/api-keys/${alice.keyId}`, { method: "DELETE", key: bob.key }),
      404,
      "API_KEY_NOT_FOUND",
    );
    expect((await call("/api/v1/users/me", { key: alice.key })).status).toBe(200);
  });

  it("refuses a 51st key with 409 API_KEY_LIMIT_REACHED", async () => {
    const user = await createUser();
    for (let i = 1; i < 50; i++) expect((await call("/api/v1/api-keys", { method: "POST", key: user.key })).status).toBe(201);
    await expectError(await call("/api/v1/api-keys", { method: "POST", key: user.key }), 409, "API_KEY_LIMIT_REACHED");
  });

  it("rejects a malformed page_id with 422", async () => {
    const user = await createUser();
    const body = await expectError(await call("/api/v1/api-keys?page_id=%%%", { key: user.key }), 422, "VALIDATION_ERROR");
    expect(body.detail).toEqual([expect.objectContaining({ loc: ["query", "page_id"] })]);
  });
});

describe("operator routes", () => {
  it("refuse a missing or wrong ADMIN_TOKEN", async () => {
    await expectError(await call("/api/v1/admin/users", { method: "POST", body: { name: "x" } }), 401, "INVALID_ADMIN_TOKEN");
    await expectError(
      await call("/api/v1/admin/users", { method: "POST", key: "wrong", body: { name: "x" } }),
      401,
      "INVALID_ADMIN_TOKEN",
    );
    const user = await createUser();
    await expectError(
      await call("/api/v1/admin/users", { method: "POST", key: user.key, body: { name: "x" } }),
      401,
      "INVALID_ADMIN_TOKEN",
    );
  });

  it("validates the new user", async () => {
    const response = await call("/api/v1/admin/users", { method: "POST", key: ADMIN_TOKEN, body: { name: "", email: "nope" } });
    const body = await expectError(response, 422, "VALIDATION_ERROR");
    expect((body.detail as { loc: string[] }[]).map((issue) => issue.loc.join("."))).toEqual(["body.name", "body.email"]);
  });

  it("issue another key to an existing user, and 404 for an unknown one", async () => {
    const user = await createUser();
    const response = await call(`/api/v1/admin/users/${user.id}/api-keys`, {
      method: "POST",
      key: ADMIN_TOKEN,
      body: { name: "recovery" },
    });
    expect(response.status).toBe(201);
    const { key } = await json<{ key: string }>(response);
    expect((await json<{ id: string }>(await call("/api/v1/users/me", { key }))).id).toBe(user.id);
    await expectError(
      await call("/api/v1/admin/users/nobody/api-keys", { method: "POST", key: ADMIN_TOKEN }),
      404,
      "USER_NOT_FOUND",
    );
  });
});
