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
  `CREATE TABLE sandboxes (
     id TEXT PRIMARY KEY,
     status TEXT NOT NULL,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE INDEX sandboxes_by_created ON sandboxes (created_at DESC, id DESC);
   CREATE INDEX sandboxes_by_status ON sandboxes (status, created_at DESC, id DESC);`,
];

/** Statuses that hold capacity and count against the per-user limit. */
const ACTIVE_STATUSES = "('STARTING', 'RUNNING')";

export type SandboxIndexRow = {
  id: string;
  status: string;
  created_at: string;
  updated_at: string;
};

export type Admission = { admitted: true } | { admitted: false; active: number };

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

  /**
   * Admission control, atomic because the object runs one call at a time and this one does not
   * await: admits the sandbox (a new one, or a PAUSED/ERROR one resuming) as STARTING when
   * fewer than `limit` others are STARTING or RUNNING.
   */
  admitSandbox(id: string, createdAt: string, limit: number): Admission {
    const sql = this.ctx.storage.sql;
    const active = sql
      .exec<{ n: number }>(`SELECT COUNT(*) AS n FROM sandboxes WHERE status IN ${ACTIVE_STATUSES} AND id != ?`, id)
      .one().n;
    if (active >= limit) return { admitted: false, active };
    const now = new Date().toISOString();
    sql.exec(
      "INSERT INTO sandboxes (id, status, created_at, updated_at) VALUES (?, 'STARTING', ?, ?) ON CONFLICT (id) DO UPDATE SET status = 'STARTING', updated_at = excluded.updated_at",
      id,
      createdAt,
      now,
    );
    return { admitted: true };
  }

  /** Keeps the index in step with the sandbox; MISSING removes the row. Ignores unknown ids. */
  recordSandboxStatus(id: string, status: string, updatedAt: string): void {
    if (status === "MISSING") this.ctx.storage.sql.exec("DELETE FROM sandboxes WHERE id = ?", id);
    else this.ctx.storage.sql.exec("UPDATE sandboxes SET status = ?, updated_at = ? WHERE id = ?", status, updatedAt, id);
  }

  forgetSandbox(id: string): void {
    this.ctx.storage.sql.exec("DELETE FROM sandboxes WHERE id = ?", id);
  }

  /** The ids among `ids` that are this user's sandboxes. */
  ownedSandboxes(ids: string[]): string[] {
    if (ids.length === 0) return [];
    const placeholders = ids.map(() => "?").join(", ");
    return this.ctx.storage.sql
      .exec<{ id: string }>(`SELECT id FROM sandboxes WHERE id IN (${placeholders})`, ...ids)
      .toArray()
      .map((row) => row.id);
  }

  /** Newest first, optionally one status; `after` is the previous page's last (created_at, id). */
  searchSandboxes(status: string | null, limit: number, after: [string, string] | null): SandboxIndexRow[] {
    const where: string[] = [];
    const bindings: (string | number)[] = [];
    if (status !== null) {
      where.push("status = ?");
      bindings.push(status);
    }
    if (after !== null) {
      where.push("(created_at, id) < (?, ?)");
      bindings.push(after[0], after[1]);
    }
    const clause = where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`;
    return this.ctx.storage.sql
      .exec<SandboxIndexRow>(
        `SELECT id, status, created_at, updated_at FROM sandboxes ${clause} ORDER BY created_at DESC, id DESC LIMIT ?`,
        ...bindings,
        limit,
      )
      .toArray();
  }

  countSandboxes(status: string | null): number {
    const sql = this.ctx.storage.sql;
    return status === null
      ? sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sandboxes").one().n
      : sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sandboxes WHERE status = ?", status).one().n;
  }
}
