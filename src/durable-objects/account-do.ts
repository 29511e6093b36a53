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
  `CREATE TABLE provider_tokens (
     provider TEXT PRIMARY KEY,
     sealed TEXT NOT NULL,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE TABLE conversations (
     id TEXT PRIMARY KEY,
     title TEXT NOT NULL,
     sandbox_id TEXT,
     parent_id TEXT,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE INDEX conversations_by_created ON conversations (created_at, id);
   CREATE INDEX conversations_by_updated ON conversations (updated_at, id);
   CREATE INDEX conversations_by_title ON conversations (title, id);
   CREATE INDEX conversations_by_sandbox ON conversations (sandbox_id);
   CREATE INDEX conversations_by_parent ON conversations (parent_id, created_at);
   CREATE TABLE start_tasks (
     id TEXT PRIMARY KEY,
     conversation_id TEXT NOT NULL,
     app_conversation_id TEXT,
     created_at TEXT NOT NULL
   );
   CREATE INDEX start_tasks_by_created ON start_tasks (created_at, id);
   CREATE INDEX start_tasks_by_conversation ON start_tasks (app_conversation_id, created_at, id);`,
];

export type ConversationIndexRow = {
  id: string;
  title: string;
  sandbox_id: string | null;
  parent_id: string | null;
  created_at: string;
  updated_at: string;
};

export type StartTaskIndexRow = {
  id: string;
  /** The ConversationDO that holds the task (named by the conversation id it will create). */
  conversation_id: string;
  /** Set once the task is READY. */
  app_conversation_id: string | null;
  created_at: string;
};

export type ProviderTokenRow = { provider: string; sealed: string; created_at: string; updated_at: string };

export interface ConversationFilter {
  title_contains?: string | undefined;
  created_at_gte?: string | undefined;
  created_at_lt?: string | undefined;
  updated_at_gte?: string | undefined;
  updated_at_lt?: string | undefined;
  sandbox_id?: string | undefined;
}

/** The column a conversation search orders by, and its direction. */
export interface ConversationOrder {
  column: "created_at" | "updated_at" | "title";
  descending: boolean;
}

const CONVERSATION_COLUMNS = "id, title, sandbox_id, parent_id, created_at, updated_at";

function conversationWhere(filter: ConversationFilter): { clauses: string[]; bindings: string[] } {
  const clauses: string[] = [];
  const bindings: string[] = [];
  const add = (clause: string, value: string | undefined) => {
    if (value === undefined) return;
    clauses.push(clause);
    bindings.push(value);
  };
  // instr() rather than LIKE: a title filter may contain % or _ and must match them literally.
  add("instr(lower(title), lower(?)) > 0", filter.title_contains);
  add("created_at >= ?", filter.created_at_gte);
  add("created_at < ?", filter.created_at_lt);
  add("updated_at >= ?", filter.updated_at_gte);
  add("updated_at < ?", filter.updated_at_lt);
  add("sandbox_id = ?", filter.sandbox_id);
  return { clauses, bindings };
}

function placeholders(values: readonly unknown[]): string {
  return values.map(() => "?").join(", ");
}

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
    return this.ctx.storage.sql
      .exec<{ id: string }>(`SELECT id FROM sandboxes WHERE id IN (${placeholders(ids)})`, ...ids)
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

  // ---- git provider tokens (sealed by the Worker; this object never sees a plaintext) ----

  putProviderToken(provider: string, sealed: string, now: string): ProviderTokenRow {
    this.ctx.storage.sql.exec(
      `INSERT INTO provider_tokens (provider, sealed, created_at, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (provider) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
      provider,
      sealed,
      now,
      now,
    );
    return this.ctx.storage.sql.exec<ProviderTokenRow>("SELECT * FROM provider_tokens WHERE provider = ?", provider).one();
  }

  getProviderToken(provider: string): ProviderTokenRow | null {
    return (
      this.ctx.storage.sql.exec<ProviderTokenRow>("SELECT * FROM provider_tokens WHERE provider = ?", provider).toArray()[0] ??
      null
    );
  }

  listProviderTokens(): ProviderTokenRow[] {
    return this.ctx.storage.sql.exec<ProviderTokenRow>("SELECT * FROM provider_tokens ORDER BY provider").toArray();
  }

  /** True when a token was stored. */
  deleteProviderToken(provider: string): boolean {
    return this.ctx.storage.sql.exec("DELETE FROM provider_tokens WHERE provider = ?", provider).rowsWritten > 0;
  }

  // ---- conversations index -------------------------------------------------------------

  /** Adds or refreshes a conversation's row (the entity is written first; this is idempotent). */
  indexConversation(row: ConversationIndexRow): void {
    this.ctx.storage.sql.exec(
      `INSERT INTO conversations (${CONVERSATION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET title = excluded.title, sandbox_id = excluded.sandbox_id,
         parent_id = excluded.parent_id, updated_at = excluded.updated_at`,
      row.id,
      row.title,
      row.sandbox_id,
      row.parent_id,
      row.created_at,
      row.updated_at,
    );
  }

  /**
   * Removes a conversation and its start tasks from the index. Answers whether its sandbox is
   * still used by another of the user's conversations.
   */
  removeConversation(id: string): { sandbox_id: string | null; sandbox_in_use: boolean } {
    const sql = this.ctx.storage.sql;
    const row = sql.exec<{ sandbox_id: string | null }>("SELECT sandbox_id FROM conversations WHERE id = ?", id).toArray()[0];
    sql.exec("DELETE FROM conversations WHERE id = ?", id);
    sql.exec("DELETE FROM start_tasks WHERE conversation_id = ? OR app_conversation_id = ?", id, id);
    const sandboxId = row?.sandbox_id ?? null;
    if (sandboxId === null) return { sandbox_id: null, sandbox_in_use: false };
    const users = sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM conversations WHERE sandbox_id = ?", sandboxId).one().n;
    return { sandbox_id: sandboxId, sandbox_in_use: users > 0 };
  }

  /** The index rows among `ids` (in no particular order). */
  conversationRows(ids: string[]): ConversationIndexRow[] {
    if (ids.length === 0) return [];
    return this.ctx.storage.sql
      .exec<ConversationIndexRow>(`SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE id IN (${placeholders(ids)})`, ...ids)
      .toArray();
  }

  /** Every conversation id of the user (for searches that span them all). */
  conversationIds(): string[] {
    return this.ctx.storage.sql
      .exec<{ id: string }>("SELECT id FROM conversations")
      .toArray()
      .map((row) => row.id);
  }

  /** The children of each of `ids`, oldest first. */
  childConversations(ids: string[]): { id: string; parent_id: string }[] {
    if (ids.length === 0) return [];
    return this.ctx.storage.sql
      .exec<{ id: string; parent_id: string }>(
        `SELECT id, parent_id FROM conversations WHERE parent_id IN (${placeholders(ids)}) ORDER BY created_at, id`,
        ...ids,
      )
      .toArray();
  }

  /**
   * One page in `order`, ties broken by id; `after` is the previous page's last (sort value, id).
   * Each sort column has its own index, so a page costs O(limit) whatever the total.
   */
  searchConversations(
    filter: ConversationFilter,
    order: ConversationOrder,
    limit: number,
    after: [string, string] | null,
  ): ConversationIndexRow[] {
    const { clauses, bindings } = conversationWhere(filter);
    const direction = order.descending ? "DESC" : "ASC";
    if (after !== null) {
      clauses.push(`(${order.column}, id) ${order.descending ? "<" : ">"} (?, ?)`);
      bindings.push(after[0], after[1]);
    }
    const where = clauses.length === 0 ? "" : `WHERE ${clauses.join(" AND ")}`;
    return this.ctx.storage.sql
      .exec<ConversationIndexRow>(
        `SELECT ${CONVERSATION_COLUMNS} FROM conversations ${where} ORDER BY ${order.column} ${direction}, id ${direction} LIMIT ?`,
        ...bindings,
        limit,
      )
      .toArray();
  }

  countConversations(filter: ConversationFilter): number {
    const { clauses, bindings } = conversationWhere(filter);
    const where = clauses.length === 0 ? "" : `WHERE ${clauses.join(" AND ")}`;
    return this.ctx.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM conversations ${where}`, ...bindings).one().n;
  }

  // ---- start tasks index ---------------------------------------------------------------

  indexStartTask(row: StartTaskIndexRow): void {
    this.ctx.storage.sql.exec(
      `INSERT INTO start_tasks (id, conversation_id, app_conversation_id, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET app_conversation_id = COALESCE(excluded.app_conversation_id, app_conversation_id)`,
      row.id,
      row.conversation_id,
      row.app_conversation_id,
      row.created_at,
    );
  }

  startTaskRows(ids: string[]): StartTaskIndexRow[] {
    if (ids.length === 0) return [];
    return this.ctx.storage.sql
      .exec<StartTaskIndexRow>(`SELECT * FROM start_tasks WHERE id IN (${placeholders(ids)})`, ...ids)
      .toArray();
  }

  searchStartTasks(
    conversationId: string | null,
    createdAtGte: string | null,
    descending: boolean,
    limit: number,
    after: [string, string] | null,
  ): StartTaskIndexRow[] {
    const { where, bindings } = startTaskWhere(conversationId, createdAtGte);
    const direction = descending ? "DESC" : "ASC";
    if (after !== null) {
      where.push(`(created_at, id) ${descending ? "<" : ">"} (?, ?)`);
      bindings.push(after[0], after[1]);
    }
    const clause = where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`;
    return this.ctx.storage.sql
      .exec<StartTaskIndexRow>(
        `SELECT * FROM start_tasks ${clause} ORDER BY created_at ${direction}, id ${direction} LIMIT ?`,
        ...bindings,
        limit,
      )
      .toArray();
  }

  countStartTasks(conversationId: string | null, createdAtGte: string | null): number {
    const { where, bindings } = startTaskWhere(conversationId, createdAtGte);
    const clause = where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`;
    return this.ctx.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM start_tasks ${clause}`, ...bindings).one().n;
  }

  countSandboxes(status: string | null): number {
    const sql = this.ctx.storage.sql;
    return status === null
      ? sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sandboxes").one().n
      : sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sandboxes WHERE status = ?", status).one().n;
  }
}

function startTaskWhere(conversationId: string | null, createdAtGte: string | null): { where: string[]; bindings: string[] } {
  const where: string[] = [];
  const bindings: string[] = [];
  if (conversationId !== null) {
    where.push("app_conversation_id = ?");
    bindings.push(conversationId);
  }
  if (createdAtGte !== null) {
    where.push("created_at >= ?");
    bindings.push(createdAtGte);
  }
  return { where, bindings };
}
