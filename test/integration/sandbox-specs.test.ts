import { beforeAll, describe, expect, it } from "vitest";
import { SANDBOX_SPECS } from "../../src/config/sandbox-specs";
import { call, createUser, expectError, json, type TestUser } from "../helpers/api";

interface SpecPage {
  items: { id: string; working_dir: string; initial_env: Record<string, string>; command: string[] | null; created_at: string }[];
  next_page_id: string | null;
}

let user: TestUser;
beforeAll(async () => {
  user = await createUser();
});

describe("GET /api/v1/sandbox-specs/search", () => {
  it("lists every preset, the default first, with the contract's fields", async () => {
    const response = await call("/api/v1/sandbox-specs/search", { key: user.key });
    expect(response.status).toBe(200);
    const page = await json<SpecPage>(response);
    expect(page.next_page_id).toBeNull();
    expect(page.items.map((spec) => spec.id)).toEqual(SANDBOX_SPECS.map((spec) => spec.id));
    expect(page.items.length).toBeGreaterThanOrEqual(2);
    for (const spec of page.items) {
      expect(spec).toEqual(
        expect.objectContaining({
          id: expect.any(String),
          working_dir: expect.stringMatching(/^\//),
          initial_env: expect.any(Object),
          created_at: expect.any(String),
          image: expect.any(String),
          instance_type: expect.any(String),
        }),
      );
    }
  });

  it("pages with a small limit: no duplicates, no gaps, null at the end", async () => {
    for (const limit of [1, 2]) {
      const seen: string[] = [];
      let pageId: string | null = null;
      let pages = 0;
      do {
        const query: string = pageId === null ? `limit=${limit}` : `limit=${limit}&page_id=${encodeURIComponent(pageId)}`;
        const page: SpecPage = await json<SpecPage>(await call(`/api/v1/sandbox-specs/search?${query}`, { key: user.key }));
        expect(page.items.length).toBeLessThanOrEqual(limit);
        expect(page.items.length).toBeGreaterThan(0);
        seen.push(...page.items.map((spec) => spec.id));
        pageId = page.next_page_id;
        pages++;
      } while (pageId !== null);
      expect(seen).toEqual(SANDBOX_SPECS.map((spec) => spec.id));
      expect(pages).toBe(Math.ceil(SANDBOX_SPECS.length / limit));
    }
  });

  it.each(["limit=0", "limit=101", "limit=abc", "limit=1.5", "page_id=not-a-cursor", "page_id=eyJ2IjoxLCJrIjpbIngiXX0"])(
    "rejects %s with 422 naming the parameter",
    async (query) => {
      const body = await expectError(
        await call(`/api/v1/sandbox-specs/search?${query}`, { key: user.key }),
        422,
        "VALIDATION_ERROR",
      );
      const parameter = query.split("=")[0];
      expect(body.detail).toEqual([expect.objectContaining({ loc: ["query", parameter] })]);
    },
  );

  it("requires a key", async () => {
    await expectError(await call("/api/v1/sandbox-specs/search"), 401, "AUTH_REQUIRED");
  });
});

describe("GET /api/v1/sandbox-specs?id=", () => {
  it("answers in request order with null for unknown ids", async () => {
    const [first, second] = SANDBOX_SPECS;
    const response = await call(`/api/v1/sandbox-specs?id=${second?.id}&id=nope&id=${first?.id}`, { key: user.key });
    expect(response.status).toBe(200);
    const body = await json<({ id: string } | null)[]>(response);
    expect(body.map((spec) => spec?.id ?? null)).toEqual([second?.id, null, first?.id]);
  });

  it("takes a single id", async () => {
    const body = await json<({ id: string } | null)[]>(await call("/api/v1/sandbox-specs?id=unknown", { key: user.key }));
    expect(body).toEqual([null]);
  });

  it("rejects 101 ids and no ids with 422", async () => {
    const many = Array.from({ length: 101 }, (_, i) => `id=s${i}`).join("&");
    await expectError(await call(`/api/v1/sandbox-specs?${many}`, { key: user.key }), 422, "VALIDATION_ERROR");
    const hundred = Array.from({ length: 100 }, (_, i) => `id=s${i}`).join("&");
    expect((await call(`/api/v1/sandbox-specs?${hundred}`, { key: user.key })).status).toBe(200);
    await expectError(await call("/api/v1/sandbox-specs", { key: user.key }), 422, "VALIDATION_ERROR");
  });
});
