import { SANDBOX_SPECS, type SandboxSpec } from "../config/sandbox-specs";
import { ApiError } from "../errors";
import { type Page, pageByPosition } from "./paging";

/** The contract's SandboxSpecInfo plus what the spec runs on. */
export type SandboxSpecInfo = SandboxSpec;

export function searchSandboxSpecs(limit: number, pageId: string | undefined): Page<SandboxSpecInfo> {
  return pageByPosition(SANDBOX_SPECS, limit, pageId);
}

/** In request order, null where no spec has that id. */
export function getSandboxSpecs(ids: readonly string[]): (SandboxSpecInfo | null)[] {
  return ids.map((id) => SANDBOX_SPECS.find((spec) => spec.id === id) ?? null);
}

export function defaultSandboxSpec(): SandboxSpecInfo {
  const spec = SANDBOX_SPECS[0];
  if (spec === undefined) throw new Error("no sandbox spec configured");
  return spec;
}

/** The spec with this id, or a 404 naming it. */
export function requireSandboxSpec(id: string): SandboxSpecInfo {
  const spec = SANDBOX_SPECS.find((candidate) => candidate.id === id);
  if (spec === undefined) throw new ApiError("SANDBOX_SPEC_NOT_FOUND", `No sandbox spec with id '${id}'.`);
  return spec;
}
