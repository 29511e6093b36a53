import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { createApp } from "../../src/app";
import { BASE } from "./api";

/** Calls the app with some vars changed, the way a differently configured deployment would. */
export async function callWith(vars: Partial<Env>, path: string, init: RequestInit = {}): Promise<Response> {
  const ctx = createExecutionContext();
  const response = await createApp().fetch(new Request(`${BASE}${path}`, init), { ...env, ...vars }, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}
