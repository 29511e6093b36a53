import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ROOT } from "../../bench/lib.ts";

/** Screenshots of every test land here (README: "The web console"). */
const SHOTS = join(ROOT, "test-results", "screenshots");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const url = inject("consoleUrl");

let browser: Browser;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
});

afterAll(async () => {
  await browser?.close();
});

async function scriptModel(name: string, turns: unknown[]): Promise<string> {
  const response = await fetch(`${inject("fakeLlmUrl")}/scripts/${name}`, {
    method: "PUT",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ turns }),
  });
  expect(response.status).toBe(200);
  return `openai/${name}`;
}

const usage = { prompt_tokens: 120, completion_tokens: 30 };
const call = (name: string, args: Record<string, unknown>) => ({ tool_calls: [{ name, arguments: args }], usage });

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/** Starts a conversation from the page and waits for its live view. */
async function startFromPage(page: Page, prompt: string, model: string): Promise<string> {
  await page.goto(`${url}/`);
  await page.getByRole("link", { name: "New conversation" }).click();
  await page.getByLabel("What should the agent do?").fill(prompt);
  await page.getByLabel("Model").fill(model);
  await page.getByRole("button", { name: "Start" }).click();
  await page.waitForURL(/#\/conversations\/[0-9a-f]{32}$/, { timeout: 60_000 });
  return page.url().split("/").at(-1) ?? "";
}

describe("the web console", () => {
  it("starts a conversation, shows it working to finished with its actions, and takes a follow-up message", async () => {
    const model = await scriptModel("console-main", [
      call("terminal", { command: "echo hello-from-the-agent" }),
      call("file_editor", { command: "create", path: "notes.txt", file_text: "alpha\nbeta\n" }),
      call("file_editor", { command: "str_replace", path: "notes.txt", old_str: "beta", new_str: "gamma" }),
      call("finish", { message: "Wrote notes.txt" }),
      // The follow-up.
      { content: "Nothing else to do: notes.txt is ready.", usage },
    ]);
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await startFromPage(page, "Write notes.txt with two lines", model);
    const events = page.getByRole("list", { name: "Events" });
    await expect.poll(() => page.getByText("Agent: finished").count(), { timeout: 60_000 }).toBeGreaterThan(0);
    await expect.poll(() => events.getByText("hello-from-the-agent", { exact: false }).count()).toBeGreaterThan(0);
    // The edit is shown as a diff: the removed and the added line.
    const diff = page.getByLabel(/^Changes to .*\/notes\.txt$/).last();
    await expect.poll(() => diff.textContent()).toContain("- beta");
    expect(await diff.textContent()).toContain("+ gamma");
    expect(await events.getByText("Wrote notes.txt").count()).toBeGreaterThan(0);
    await expect.poll(() => page.locator("#token-usage").textContent()).toContain("480 in");
    await shot(page, "conversation-finished");

    await page.getByLabel("Message to the agent").fill("Anything else?");
    await page.getByRole("button", { name: "Send" }).click();
    await expect
      .poll(() => events.getByText("Nothing else to do", { exact: false }).count(), { timeout: 30_000 })
      .toBeGreaterThan(0);
    expect(await events.getByText("Anything else?").count()).toBe(1);
    await shot(page, "follow-up");

    // The list shows it, searchable by title.
    await page.goto(`${url}/#/`);
    await page.getByLabel("Search by title").fill("notes.txt");
    await expect.poll(() => page.getByRole("list", { name: "Conversations" }).getByRole("link").count()).toBe(1);
    await shot(page, "conversation-list");
    await page.close();
  });

  it("pauses and resumes a sandbox, and shows the API's detail when a message needs a running sandbox", async () => {
    const model = await scriptModel("console-pause", [
      call("finish", { message: "ok" }),
      call("finish", { message: "ok again" }),
    ]);
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const id = await startFromPage(page, "Say ok", model);
    await expect.poll(() => page.getByText("Agent: finished").count(), { timeout: 60_000 }).toBeGreaterThan(0);
    const sandboxId = (await page.locator(".facts code").first().textContent()) ?? "";

    await page.getByRole("link", { name: "Sandboxes" }).click();
    const card = page.locator(`[data-sandbox^="${sandboxId}"]`);
    await card.getByRole("button", { name: /^Pause sandbox/ }).click();
    await expect.poll(() => card.getByText("Sandbox: PAUSED").count(), { timeout: 60_000 }).toBe(1);
    await shot(page, "sandbox-paused");

    await page.goto(`${url}/#/conversations/${id}`);
    await page.getByLabel("Message to the agent").fill("Are you there?");
    await page.getByRole("button", { name: "Send" }).click();
    const alert = page.getByRole("alert");
    await expect.poll(() => alert.textContent(), { timeout: 15_000 }).toContain("resume it with POST /api/v1/sandboxes/");
    await shot(page, "api-error");

    await page.getByRole("link", { name: "Sandboxes" }).click();
    await card.getByRole("button", { name: /^Resume sandbox/ }).click();
    await expect.poll(() => card.getByText("Sandbox: RUNNING").count(), { timeout: 60_000 }).toBe(1);
    await shot(page, "sandbox-resumed");

    // With the sandbox back, the same message goes through and the agent answers.
    await page.goto(`${url}/#/conversations/${id}`);
    await page.getByLabel("Message to the agent").fill("Are you there?");
    await page.getByRole("button", { name: "Send" }).click();
    await expect
      .poll(() => page.getByRole("list", { name: "Events" }).getByText("ok again").count(), { timeout: 30_000 })
      .toBeGreaterThan(0);
    await page.close();
  });

  it("asks for an API key where keys are required, shows a wrong key's error, and works live with the right one", async () => {
    const keyed = inject("keyedConsoleUrl");
    const created = await fetch(`${keyed}/api/v1/admin/users`, {
      method: "POST",
      headers: { Authorization: `Bearer ${inject("adminToken")}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "console", email: "console@example.com" }),
    });
    expect(created.status).toBe(201);
    const { api_key } = (await created.json()) as { api_key: { key: string } };
    const model = await scriptModel("console-keyed", [call("finish", { message: "signed-in run" })]);

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${keyed}/`);
    await page.getByLabel("API key").fill("ohk_not-a-real-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("not valid");
    await shot(page, "sign-in-error");
    await page.getByLabel("API key").fill(api_key.key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Conversations" }).waitFor();
    // The key is in the tab's session storage, not in the page's address.
    expect(page.url()).not.toContain(api_key.key);

    const id = await startFromPage(page, "Run signed in", model);
    // The live view's socket authenticates with the key as a query parameter.
    await expect
      .poll(() => page.getByRole("list", { name: "Events" }).getByText("signed-in run").count(), { timeout: 60_000 })
      .toBeGreaterThan(0);
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    await page.close();
  });

  it("fits a phone-sized screen, with every control named", async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    await page.goto(`${url}/#/new`);
    await page.getByLabel("What should the agent do?").waitFor();
    // Evaluated in the page (as text: this file is type-checked for Node, not the DOM).
    const overflow = await page.evaluate<number>("document.documentElement.scrollWidth - document.documentElement.clientWidth");
    expect(overflow).toBeLessThanOrEqual(0);
    const unnamed = await page.evaluate<string[]>(`[...document.querySelectorAll("button, input, select, textarea, a")]
      .filter((element) => !(element.getAttribute("aria-label") || element.textContent.trim() || element.closest("label")))
      .map((element) => element.outerHTML)`);
    expect(unnamed).toEqual([]);
    await shot(page, "phone-new-conversation");
    await page.close();
  });
});
