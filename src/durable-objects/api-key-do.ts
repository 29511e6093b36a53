import { DurableObject } from "cloudflare:workers";
import { applyMigrations } from "./migrations";

const MIGRATIONS = [
  `CREATE TABLE api_key (
     key_id TEXT PRIMARY KEY,
     user_id TEXT NOT NULL,
     created_at TEXT NOT NULL
   )`,
];

export type ApiKeyRecord = {
  key_id: string;
  user_id: string;
  created_at: string;
};

/**
 * One object per API key, named by the SHA-256 of the key. It is the strongly consistent
 * source of truth for "does this key authenticate, and as whom": revoking deletes the object's
 * row, so the very next request with that key fails wherever it lands.
 */
export class ApiKeyDO extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => applyMigrations(ctx.storage, MIGRATIONS));
  }

  /** Records the key; idempotent for the same key id, refuses to rebind a hash to another. */
  register(record: ApiKeyRecord): boolean {
    const existing = this.resolve();
    if (existing !== null) return existing.key_id === record.key_id && existing.user_id === record.user_id;
    this.ctx.storage.sql.exec(
      "INSERT INTO api_key (key_id, user_id, created_at) VALUES (?, ?, ?)",
      record.key_id,
      record.user_id,
      record.created_at,
    );
    return true;
  }

  /** The key's owner, or null when the key was never issued or has been revoked. */
  resolve(): ApiKeyRecord | null {
    return this.ctx.storage.sql.exec<ApiKeyRecord>("SELECT key_id, user_id, created_at FROM api_key").toArray()[0] ?? null;
  }

  /** Idempotent: a revoked key stays revoked. */
  revoke(): void {
    this.ctx.storage.sql.exec("DELETE FROM api_key");
  }
}
