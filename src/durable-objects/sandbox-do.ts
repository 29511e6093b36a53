import { DurableObject } from "cloudflare:workers";

/**
 * One object per sandbox, declared as the container class in wrangler.toml. Its lifecycle
 * state machine and backends arrive with the sandbox issue.
 */
export class SandboxDO extends DurableObject<Env> {}
