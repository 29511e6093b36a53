import { z } from "zod";

/**
 * The sandbox specs this deployment offers, first one the default. Each names one of the
 * container images declared under `[containers.images]` in wrangler.toml and the instance size
 * its container starts with. Parsed once at module load: a bad preset fails every test and the
 * first request of a deploy, never silently.
 */
export const INSTANCE_TYPES = ["lite", "basic", "standard-1", "standard-2", "standard-3", "standard-4"] as const;
export const IMAGE_NAMES = ["full", "slim"] as const;

const SpecSchema = z.object({
  id: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/),
  description: z.string().min(1),
  image: z.enum(IMAGE_NAMES),
  instance_type: z.enum(INSTANCE_TYPES),
  command: z.array(z.string().min(1)).min(1).nullable(),
  working_dir: z.string().startsWith("/"),
  initial_env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()),
  created_at: z.iso.datetime(),
});

export type SandboxSpec = z.infer<typeof SpecSchema>;

const RUNTIME_COMMAND = ["node", "/opt/sandbox-runtime/server.ts"];

const PRESETS: SandboxSpec[] = [
  {
    id: "general",
    description: "General purpose: Debian with git, bash, build tools, Node.js 24, Python 3 with pip and venv, ripgrep, jq.",
    image: "full",
    instance_type: "standard-1",
    command: RUNTIME_COMMAND,
    working_dir: "/workspace",
    initial_env: { LANG: "C.UTF-8", PIP_DISABLE_PIP_VERSION_CHECK: "1", npm_config_update_notifier: "false" },
    created_at: "2026-11-21T00:00:00.000Z",
  },
  {
    id: "general-large",
    description: "The general-purpose image on a larger instance (1 vCPU, 6 GiB) for heavy builds and test suites.",
    image: "full",
    instance_type: "standard-2",
    command: RUNTIME_COMMAND,
    working_dir: "/workspace",
    initial_env: { LANG: "C.UTF-8", PIP_DISABLE_PIP_VERSION_CHECK: "1", npm_config_update_notifier: "false" },
    created_at: "2026-11-21T00:00:00.000Z",
  },
  {
    id: "slim",
    description:
      "Light: Debian with git, bash and Node.js 24 only, on a small instance. Fast to start, for scripting and small JavaScript tasks.",
    image: "slim",
    instance_type: "basic",
    command: RUNTIME_COMMAND,
    working_dir: "/workspace",
    initial_env: { LANG: "C.UTF-8", npm_config_update_notifier: "false" },
    created_at: "2026-11-21T00:00:00.000Z",
  },
];

function parseSpecs(specs: unknown): SandboxSpec[] {
  const parsed = z.array(SpecSchema).min(1).parse(specs);
  const ids = new Set(parsed.map((spec) => spec.id));
  if (ids.size !== parsed.length) throw new Error("sandbox spec ids must be unique");
  return parsed;
}

export const SANDBOX_SPECS: readonly SandboxSpec[] = Object.freeze(parseSpecs(PRESETS));
export { parseSpecs as parseSandboxSpecs };
