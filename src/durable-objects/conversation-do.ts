import { DurableObject } from "cloudflare:workers";

/**
 * One object per conversation: metadata, start task, event log and agent loop arrive with the
 * conversation and agent issues.
 */
export class ConversationDO extends DurableObject<Env> {}
