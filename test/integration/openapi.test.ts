import { describe, expect, it } from "vitest";
import { runtimeProxy } from "../../src/api/runtime-proxy";
import { createApp, DOCS_PATH, OPENAPI_PATH } from "../../src/app";
import { call, json } from "../helpers/api";

interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
}

const UNDOCUMENTED = new Set([`GET ${OPENAPI_PATH}`, `GET ${DOCS_PATH}`]);
const PROXY_METHODS = ["GET", "POST", "PUT", "DELETE"];

describe(`GET ${OPENAPI_PATH}`, () => {
  it("is an OpenAPI 3.1 document, served without credentials", async () => {
    const response = await call(OPENAPI_PATH);
    expect(response.status).toBe(200);
    expect((await json<OpenApiDocument>(response)).openapi).toBe("3.1.0");
  });

  it("lists every route the app serves, and nothing else", async () => {
    const document = await json<OpenApiDocument>(await call(OPENAPI_PATH));
    const documented = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const served = createApp().routes.flatMap((route) => {
      const path = route.path.replace(/:(\w+)/g, "{$1}").replace(/(.)\/$/, "$1");
      // A catch-all proxy route is documented as {path} for the methods it forwards.
      if (route.method === "ALL" && route.handler === runtimeProxy) {
        return PROXY_METHODS.map((method) => `${method} ${path.replace(/\/\*$/, "/{path}")}`);
      }
      if (route.method === "ALL" || path.endsWith("*")) return [];
      const key = `${route.method} ${path}`;
      return UNDOCUMENTED.has(key) ? [] : [key];
    });
    expect([...new Set(served)].sort()).toEqual([...new Set(documented)].sort());
    expect(served.length).toBeGreaterThan(5);
  });
});

describe(`GET ${DOCS_PATH}`, () => {
  it("renders the document for people", async () => {
    const response = await call(DOCS_PATH);
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toContain("text/html");
    expect(await response.text()).toContain(OPENAPI_PATH);
  });
});
