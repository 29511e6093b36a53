import { DurableObject } from "cloudflare:workers";
import { applyMigrations } from "./migrations";

const MIGRATIONS = [
  `CREATE TABLE profile (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     email TEXT,
     created_at TEXT NOT NULL
   );
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     prefix TEXT NOT NULL,
     key_hash TEXT NOT NULL UNIQUE,
     created_at TEXT NOT NULL
   );
   CREATE INDEX api_keys_by_created ON api_keys (created_at DESC, id DESC);`,
];

// Type aliases (not interfaces) so that they satisfy SqlStorage's row constraint.
export type UserProfile = {
  id: string;
  name: string;
  email: string | null;
  created_at: string;
};

export type ApiKeyRow = {
  id: string;
  name: string;
  prefix: string;
  key_hash: string;
  created_at: string;
};

const KEY_COLUMNS = "id, name, prefix, key_hash, created_at";

/**
 * One object per user: the user's profile and the index of everything the user owns (API keys
 * here; sandboxes, conversations and start tasks as their issues add them). Every read is
 * scoped by construction: an object only ever holds its own user's rows.
 */
export class AccountDO extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => applyMigrations(ctx.storage, MIGRATIONS));
  }

  /** Creates the profile once; later calls return the existing one unchanged. */
  initProfile(profile: UserProfile): UserProfile {
    this.ctx.storage.sql.exec(
      "INSERT OR IGNORE INTO profile (id, name, email, created_at) VALUES (?, ?, ?, ?)",
      profile.id,
      profile.name,
      profile.email,
      profile.created_at,
    );
    return this.getProfile() ?? profile;
  }

  /** The user's profile, or null when no such user was ever created. */
  getProfile(): UserProfile | null {
    return this.ctx.storage.sql.exec<UserProfile>("SELECT id, name, email, created_at FROM profile").toArray()[0] ?? null;
  }

  countApiKeys(): number {
    return this.ctx.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM api_keys").one().n;
  }

  addApiKey(row: ApiKeyRow): void {
    this.ctx.storage.sql.exec(
      "INSERT OR IGNORE INTO api_keys (id, name, prefix, key_hash, created_at) VALUES (?, ?, ?, ?, ?)",
      row.id,
      row.name,
      row.prefix,
      row.key_hash,
      row.created_at,
    );
  }

  /** Newest first; `after` is the (created_at, id) of the previous page's last row. */
  listApiKeys(limit: number, after: [string, string] | null): ApiKeyRow[] {
    const cursor =
      after === null
        ? this.ctx.storage.sql.exec<ApiKeyRow>(
            `SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at DESC, id DESC LIMIT ?`,
            limit,
          )
        : this.ctx.storage.sql.exec<ApiKeyRow>(
            `SELECT ${KEY_COLUMNS} FROM api_keys WHERE (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`,
            after[0],
            after[1],
            limit,
          );
    return cursor.toArray();
  }

  /** The key's row, or null when this user has no key with that id. */
  getApiKey(id: string): ApiKeyRow | null {
    return this.ctx.storage.sql.exec<ApiKeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`, id).toArray()[0] ?? null;
  }

  deleteApiKey(id: string): void {
    this.ctx.storage.sql.exec("DELETE FROM api_keys WHERE id = ?", id);
  }
}
