import { DurableObject } from "cloudflare:workers";
import type { SandboxSpec } from "../config/sandbox-specs";
import { runtimeRequest, type SandboxBackend } from "../sandbox/backend";
import { ContainerBackend } from "../sandbox/container-backend";
import { LocalBackend } from "../sandbox/local-backend";
import { sameSecret } from "../services/ids";
import { PROXY_SESSION_KEY_HEADER, PROXY_USER_HEADER } from "../services/proxy-headers";
import { applyMigrations } from "./migrations";

export type SandboxStatus = "STARTING" | "RUNNING" | "PAUSED" | "ERROR" | "MISSING";

const MIGRATIONS = [
  `CREATE TABLE sandbox (
     id TEXT PRIMARY KEY,
     user_id TEXT NOT NULL,
     spec_json TEXT NOT NULL,
     status TEXT NOT NULL,
     status_detail TEXT,
     session_api_key TEXT NOT NULL,
     runtime_token TEXT NOT NULL,
     attempt INTEGER NOT NULL DEFAULT 0,
     start_timeout_ms INTEGER NOT NULL,
     start_deadline INTEGER,
     idle_timeout_ms INTEGER NOT NULL,
     snapshot_key TEXT,
     snapshot_bytes INTEGER,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL,
     last_activity_at INTEGER NOT NULL
   )`,
  // The workspace snapshot as layers: a full archive, then the changes of each later pause.
  `CREATE TABLE snapshot_layers (
     seq INTEGER PRIMARY KEY,
     key TEXT NOT NULL,
     bytes INTEGER NOT NULL,
     kind TEXT NOT NULL
   )`,
  `INSERT INTO snapshot_layers (key, bytes, kind)
     SELECT snapshot_key, COALESCE(snapshot_bytes, 0), 'full' FROM sandbox WHERE snapshot_key IS NOT NULL`,
  // The layers are the one record of the snapshot: its key and size are derived from them.
  "ALTER TABLE sandbox DROP COLUMN snapshot_key",
  "ALTER TABLE sandbox DROP COLUMN snapshot_bytes",
];

type SnapshotLayer = { seq: number; key: string; bytes: number; kind: "full" | "incremental" };

/** Past this many layers, or when the changes weigh as much as the full layer, a pause takes a full one. */
const MAX_SNAPSHOT_LAYERS = 8;

type SandboxRow = {
  id: string;
  user_id: string;
  spec_json: string;
  status: SandboxStatus;
  status_detail: string | null;
  session_api_key: string;
  runtime_token: string;
  attempt: number;
  start_timeout_ms: number;
  start_deadline: number | null;
  idle_timeout_ms: number;
  created_at: string;
  updated_at: string;
  last_activity_at: number;
};

/** What the object tells the service; the service shapes the API's SandboxInfo from it. */
export interface SandboxRecord {
  id: string;
  user_id: string;
  spec_id: string;
  status: SandboxStatus;
  status_detail: string | null;
  session_api_key: string;
  created_at: string;
  updated_at: string;
  last_activity_at: string;
  snapshot_bytes: number | null;
}

export interface CreateSandbox {
  id: string;
  user_id: string;
  spec: SandboxSpec;
  session_api_key: string;
  start_timeout_ms: number;
  idle_timeout_ms: number;
}

export type LifecycleResult = { ok: true } | { ok: false; reason: "not_found" | "upstream"; detail: string };

/** How often a RUNNING sandbox's runtime is health-checked by the alarm. */
const HEALTH_INTERVAL_MS = 30_000;
/** How often a starting runtime is polled for health. */
const START_POLL_MS = 25;

function randomToken(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * One object per sandbox, declared as the container class. It owns the lifecycle
 * STARTING → RUNNING → PAUSED → STARTING → RUNNING …, ERROR and MISSING; the runtime's token;
 * the workspace snapshot in R2; and one alarm whose deadline is the earliest of the start
 * timeout, the idle timeout and the next health check.
 *
 * Lifecycle operations run one at a time (`serialize`). A start is driven in the background
 * and tagged with an attempt number: whatever changed the status meanwhile (a pause, a delete)
 * wins, and the stale driver stops. If the object is evicted mid-start, the alarm finishes or
 * fails the start at its deadline.
 */
export class SandboxDO extends DurableObject<Env> {
  private backendInstance: SandboxBackend | null = null;
  private lifecycle: Promise<unknown> = Promise.resolve();
  private pausing = false;
  /** The attempt whose start this instance is driving, if any; lost with an eviction. */
  private driving: number | null = null;
  private lastActivityWrite = 0;
  private lastActivity = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => applyMigrations(ctx.storage, MIGRATIONS));
  }

  /** Chooses the backend: the container where containers are on, else the local host. */
  protected createBackend(sandboxId: string): SandboxBackend {
    const container = this.ctx.container;
    if (container) return new ContainerBackend(container);
    return new LocalBackend(this.env.LOCAL_SANDBOX_HOST_URL ?? "", sandboxId);
  }

  private backend(row: SandboxRow): SandboxBackend {
    this.backendInstance ??= this.createBackend(row.id);
    return this.backendInstance;
  }

  private serialize<T>(operation: () => Promise<T>): Promise<T> {
    const result = this.lifecycle.then(operation);
    this.lifecycle = result.catch(() => undefined);
    return result;
  }

  private row(): SandboxRow | null {
    return this.ctx.storage.sql.exec<SandboxRow>("SELECT * FROM sandbox").toArray()[0] ?? null;
  }

  private toRecord(row: SandboxRow): SandboxRecord {
    const spec = JSON.parse(row.spec_json) as SandboxSpec;
    return {
      id: row.id,
      user_id: row.user_id,
      spec_id: spec.id,
      status: row.status,
      status_detail: row.status_detail,
      session_api_key: row.session_api_key,
      created_at: row.created_at,
      updated_at: row.updated_at,
      last_activity_at: new Date(this.lastActivityAt(row)).toISOString(),
      snapshot_bytes: this.ctx.storage.sql.exec<{ bytes: number | null }>("SELECT SUM(bytes) AS bytes FROM snapshot_layers").one()
        .bytes,
    };
  }

  /** Moves to `status`, tells the owner's index, and re-arms the alarm. */
  private async transition(
    status: SandboxStatus,
    detail: string | null,
    extra: Partial<Pick<SandboxRow, "start_deadline" | "attempt">> = {},
  ): Promise<void> {
    const now = new Date().toISOString();
    const row = this.row();
    if (row === null) return;
    this.ctx.storage.sql.exec(
      "UPDATE sandbox SET status = ?, status_detail = ?, updated_at = ?, start_deadline = ?, attempt = ?",
      status,
      detail,
      now,
      extra.start_deadline !== undefined ? extra.start_deadline : status === "STARTING" ? row.start_deadline : null,
      extra.attempt ?? row.attempt,
    );
    await this.env.ACCOUNT.getByName(row.user_id).recordSandboxStatus(row.id, status, now);
    await this.armAlarm();
  }

  private async armAlarm(): Promise<void> {
    const row = this.row();
    let due: number | null = null;
    // While starting, wake every second: after an eviction the alarm takes over the drive.
    if (row?.status === "STARTING" && row.start_deadline !== null) due = Math.min(row.start_deadline, Date.now() + 1000);
    if (row?.status === "RUNNING")
      due = Math.min(this.lastActivityAt(row) + row.idle_timeout_ms, Date.now() + HEALTH_INTERVAL_MS);
    if (due === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(due);
  }

  // ---- RPC surface -------------------------------------------------------------------------

  /** The sandbox, or null when this object holds none (never created, or deleted). */
  get(): SandboxRecord | null {
    const row = this.row();
    return row === null || row.status === "MISSING" ? null : this.toRecord(row);
  }

  /** Creates the sandbox and starts it in the background. Idempotent for the same id. */
  async create(input: CreateSandbox): Promise<SandboxRecord> {
    return this.serialize(async () => {
      const existing = this.row();
      if (existing !== null) return this.toRecord(existing);
      const now = Date.now();
      const iso = new Date(now).toISOString();
      this.ctx.storage.sql.exec(
        `INSERT INTO sandbox (id, user_id, spec_json, status, session_api_key, runtime_token, attempt,
           start_timeout_ms, start_deadline, idle_timeout_ms, created_at, updated_at, last_activity_at)
         VALUES (?, ?, ?, 'STARTING', ?, ?, 1, ?, ?, ?, ?, ?, ?)`,
        input.id,
        input.user_id,
        JSON.stringify(input.spec),
        input.session_api_key,
        randomToken(),
        input.start_timeout_ms,
        now + input.start_timeout_ms,
        input.idle_timeout_ms,
        iso,
        iso,
        now,
      );
      await this.armAlarm();
      const row = this.row() as SandboxRow;
      this.ctx.waitUntil(this.driveStartLogged(row.attempt));
      return this.toRecord(row);
    });
  }

  /**
   * Starts a PAUSED or ERROR sandbox again (the caller has admitted it); the workspace snapshot
   * is restored before it reports RUNNING. STARTING and RUNNING: nothing to do.
   */
  async resume(startTimeoutMs: number): Promise<LifecycleResult> {
    return this.serialize(async () => {
      const row = this.row();
      if (row === null || row.status === "MISSING") return { ok: false, reason: "not_found", detail: "No such sandbox." };
      if (row.status === "STARTING" || row.status === "RUNNING") return { ok: true };
      const attempt = row.attempt + 1;
      this.ctx.storage.sql.exec("UPDATE sandbox SET last_activity_at = ?, start_timeout_ms = ?", Date.now(), startTimeoutMs);
      await this.transition("STARTING", null, { start_deadline: Date.now() + startTimeoutMs, attempt });
      this.ctx.waitUntil(this.driveStartLogged(attempt));
      return { ok: true };
    });
  }

  /**
   * Snapshots the workspace into R2, then stops the runtime. Idempotent: PAUSED stays PAUSED.
   * A starting sandbox is stopped (its last snapshot stays the one to restore).
   */
  async pause(reason = "requested"): Promise<LifecycleResult> {
    return this.serialize(async () => {
      const row = this.row();
      if (row === null || row.status === "MISSING") return { ok: false, reason: "not_found", detail: "No such sandbox." };
      if (row.status === "PAUSED") return { ok: true };
      if (row.status === "RUNNING") {
        this.pausing = true;
        try {
          await this.snapshot(row);
        } catch (error) {
          const detail = `Could not snapshot the workspace before pausing: ${describeError(error)}`;
          if (!(await this.healthy(row))) await this.transition("ERROR", `The sandbox runtime stopped answering. ${detail}`);
          return { ok: false, reason: "upstream", detail };
        } finally {
          this.pausing = false;
        }
      }
      await this.stopBackend(row);
      await this.transition("PAUSED", reason === "idle" ? "Paused after being idle." : null, { attempt: row.attempt + 1 });
      return { ok: true };
    });
  }

  /** Stops the runtime, deletes the snapshot, and forgets the sandbox. Idempotent. */
  async destroy(): Promise<LifecycleResult> {
    return this.serialize(async () => {
      const row = this.row();
      if (row === null || row.status === "MISSING") return { ok: false, reason: "not_found", detail: "No such sandbox." };
      await this.stopBackend(row);
      const keys = this.layers().map((layer) => layer.key);
      if (keys.length > 0) await this.env.WORKSPACES.delete(keys);
      await this.transition("MISSING", "Deleted.", { attempt: row.attempt + 1 });
      this.ctx.storage.sql.exec("DELETE FROM snapshot_layers");
      await this.ctx.storage.deleteAlarm();
      return { ok: true };
    });
  }

  /**
   * Records activity (API, runtime and agent use) so that idle pause leaves the sandbox alone.
   * Written at most once a second: idle timeouts are minutes, and a write per proxied call
   * would cost every call a storage round.
   */
  private recordActivity(): void {
    const now = Date.now();
    this.lastActivity = now;
    if (now - this.lastActivityWrite < 1000) return;
    this.lastActivityWrite = now;
    this.ctx.storage.sql.exec("UPDATE sandbox SET last_activity_at = ?", now);
  }

  /**
   * Activity from outside (a running agent waiting on its model). Answers the sandbox's idle
   * timeout, so that the caller knows how often it must say so; null when there is no sandbox.
   */
  markActivity(): { idle_timeout_ms: number } | null {
    const row = this.ctx.storage.sql.exec<{ idle_timeout_ms: number }>("SELECT idle_timeout_ms FROM sandbox").toArray()[0];
    if (row === undefined) return null;
    this.recordActivity();
    return { idle_timeout_ms: row.idle_timeout_ms };
  }

  /** The latest activity: this instance's memory, else the stored value (at most 1 s older). */
  private lastActivityAt(row: SandboxRow): number {
    return Math.max(row.last_activity_at, this.lastActivity);
  }

  /**
   * The runtime proxy: forwards the request (path and query relative to the runtime) with the
   * runtime's token. Answers 409 unless RUNNING; a runtime that no longer answers turns the
   * sandbox to ERROR.
   */
  override async fetch(request: Request): Promise<Response> {
    const row = this.row();
    if (row === null || row.status === "MISSING")
      return Response.json({ detail: "No such sandbox.", code: "SANDBOX_NOT_FOUND" }, { status: 404 });
    const sessionKey = request.headers.get(PROXY_SESSION_KEY_HEADER);
    const user = request.headers.get(PROXY_USER_HEADER);
    const allowed =
      user !== null ? user === row.user_id : sessionKey !== null && (await sameSecret(sessionKey, row.session_api_key));
    if (!allowed)
      return Response.json(
        { detail: "The key is not this sandbox's session_api_key.", code: "INVALID_API_KEY" },
        { status: 401 },
      );
    if (row.status !== "RUNNING" || this.pausing) {
      return Response.json(
        { detail: `The sandbox is ${this.pausing ? "pausing" : row.status}; resume it first.`, code: "SANDBOX_NOT_RUNNING" },
        { status: 409 },
      );
    }
    this.recordActivity();
    const url = new URL(request.url);
    const headers = new Headers(request.headers);
    headers.delete(PROXY_SESSION_KEY_HEADER);
    headers.delete(PROXY_USER_HEADER);
    headers.set("Authorization", `Bearer ${row.runtime_token}`);
    try {
      return await this.backend(row).fetch(
        new Request(`http://runtime${url.pathname}${url.search}`, { method: request.method, headers, body: request.body }),
      );
    } catch (error) {
      const detail = `The sandbox runtime did not answer: ${describeError(error)}`;
      if (!(await this.healthy(row))) await this.serialize(async () => this.failIfRunning(row.attempt, detail));
      return Response.json({ detail, code: "UPSTREAM_ERROR" }, { status: 502 });
    }
  }

  override async alarm(): Promise<void> {
    const row = this.row();
    if (row === null) return;
    const now = Date.now();
    if (row.status === "STARTING" && row.start_deadline !== null) {
      if (now < row.start_deadline) {
        if (this.driving !== row.attempt) this.ctx.waitUntil(this.driveStartLogged(row.attempt));
        return this.armAlarm();
      }
      await this.serialize(async () => {
        if (this.row()?.attempt !== row.attempt || this.row()?.status !== "STARTING") return;
        await this.stopBackend(row);
        await this.transition("ERROR", `The sandbox did not answer its health check within ${row.start_timeout_ms / 1000} s.`);
      });
      return;
    }
    if (row.status === "RUNNING") {
      if (now >= this.lastActivityAt(row) + row.idle_timeout_ms) {
        await this.pause("idle");
        return;
      }
      if (!(await this.healthy(row))) {
        await this.serialize(async () =>
          this.failIfRunning(row.attempt, "The sandbox runtime stopped answering its health check."),
        );
        return;
      }
      await this.armAlarm();
    }
  }

  // ---- internals ----------------------------------------------------------------------------

  private async healthy(row: SandboxRow): Promise<boolean> {
    try {
      const response = await this.backend(row).fetch(runtimeRequest("/health", row.runtime_token));
      await response.body?.cancel();
      return response.ok;
    } catch {
      return false;
    }
  }

  private async failIfRunning(attempt: number, detail: string): Promise<void> {
    const current = this.row();
    if (current === null || current.attempt !== attempt || current.status !== "RUNNING") return;
    await this.stopBackend(current).catch(() => undefined);
    await this.transition("ERROR", detail);
  }

  private async stopBackend(row: SandboxRow): Promise<void> {
    await this.backend(row).stop();
  }

  /** A background drive never rejects: a failure is logged, and the alarm fails the start at its deadline. */
  private async driveStartLogged(attempt: number): Promise<void> {
    try {
      await this.driveStart(attempt);
    } catch (error) {
      console.error(
        JSON.stringify({
          level: "error",
          msg: "sandbox start drive failed",
          sandbox_id: this.row()?.id,
          error: describeError(error),
        }),
      );
    }
  }

  /**
   * Launches the runtime and polls its health until RUNNING, the deadline, or a newer attempt.
   * Launching is idempotent on both backends, so a drive resumed by the alarm is safe.
   */
  private async driveStart(attempt: number): Promise<void> {
    const row = this.row();
    if (row === null || row.attempt !== attempt || row.status !== "STARTING" || this.driving === attempt) return;
    this.driving = attempt;
    try {
      await this.launchAndWait(row, attempt);
    } finally {
      if (this.driving === attempt) this.driving = null;
    }
  }

  private async launchAndWait(row: SandboxRow, attempt: number): Promise<void> {
    const spec = JSON.parse(row.spec_json) as SandboxSpec;
    try {
      await this.backend(row).start({
        token: row.runtime_token,
        image: spec.image,
        instanceType: spec.instance_type,
        workingDir: spec.working_dir,
        env: spec.initial_env,
      });
    } catch (error) {
      await this.serialize(async () => {
        if (this.row()?.attempt !== attempt || this.row()?.status !== "STARTING") return;
        await this.transition("ERROR", `The sandbox failed to start: ${describeError(error)}`);
      });
      return;
    }
    while (this.row()?.attempt === attempt && this.row()?.status === "STARTING" && Date.now() < (row.start_deadline ?? 0)) {
      if (await this.healthy(row)) return this.finishStart(attempt);
      await new Promise((resolve) => setTimeout(resolve, START_POLL_MS));
    }
    // Past the deadline: the alarm records the timeout.
  }

  /** The runtime answers: restore the workspace snapshot, if any, and report RUNNING. */
  private finishStart(attempt: number): Promise<void> {
    return this.serialize(async () => {
      const row = this.row();
      if (row === null || row.attempt !== attempt || row.status !== "STARTING") return;
      if (Date.now() >= (row.start_deadline ?? 0)) return;
      const layers = this.layers();
      if (layers.length > 0) {
        try {
          await this.restore(row, layers);
        } catch (error) {
          await this.stopBackend(row).catch(() => undefined);
          await this.transition("ERROR", `Could not restore the workspace snapshot: ${describeError(error)}`);
          return;
        }
      }
      this.ctx.storage.sql.exec("UPDATE sandbox SET last_activity_at = ?", Date.now());
      await this.transition("RUNNING", null);
    });
  }

  private layers(): SnapshotLayer[] {
    return this.ctx.storage.sql.exec<SnapshotLayer>("SELECT * FROM snapshot_layers ORDER BY seq").toArray();
  }

  /**
   * Uploads a snapshot layer to R2: the changes since the snapshot the runtime was restored from
   * (named by the last layer's key), or a full archive when there is none, the chain is long, or the
   * changes weigh as much as the full layer. A full layer replaces the chain; the old objects
   * are deleted once the new one is recorded.
   */
  private async snapshot(row: SandboxRow): Promise<void> {
    const layers = this.layers();
    const changes = layers.filter((layer) => layer.kind === "incremental").reduce((sum, layer) => sum + layer.bytes, 0);
    const full = layers.find((layer) => layer.kind === "full");
    const compact = full === undefined || layers.length >= MAX_SNAPSHOT_LAYERS || changes >= full.bytes;
    const since = compact ? "" : (layers.at(-1)?.key ?? "");
    const path = `/archive?since=${encodeURIComponent(since)}`;
    let layer: Omit<SnapshotLayer, "seq">;
    try {
      layer = await this.uploadLayer(row, path);
    } catch (error) {
      // The runtime streams the archive at the length a dry run gave, and cuts the stream when
      // the files changed in between; once more, from an archive it writes out first.
      console.warn(
        JSON.stringify({
          level: "warn",
          msg: "streamed snapshot failed, retrying spooled",
          sandbox_id: row.id,
          error: describeError(error),
        }),
      );
      layer = await this.uploadLayer(row, `${path}&spool=true`);
    }
    const { key, bytes, kind } = layer;
    const replaced = kind === "full" ? layers : [];
    this.ctx.storage.transactionSync(() => {
      if (kind === "full") this.ctx.storage.sql.exec("DELETE FROM snapshot_layers");
      this.ctx.storage.sql.exec("INSERT INTO snapshot_layers (key, bytes, kind) VALUES (?, ?, ?)", key, bytes, kind);
    });
    await this.deleteObjects(replaced.map((old) => old.key));
  }

  /** Streams the runtime's archive at `path` into a new R2 object: the layer to record. */
  private async uploadLayer(row: SandboxRow, path: string): Promise<Omit<SnapshotLayer, "seq">> {
    const response = await this.backend(row).fetch(runtimeRequest(path, row.runtime_token));
    if (!response.ok || response.body === null) {
      await response.body?.cancel();
      throw new Error(`the runtime answered ${response.status} for its archive`);
    }
    const kind = response.headers.get("X-Archive-Kind") === "incremental" ? "incremental" : "full";
    const key = `workspaces/${row.id}/${crypto.randomUUID()}.tar`;
    const object = await this.env.WORKSPACES.put(key, response.body, {
      httpMetadata: { contentType: "application/x-tar" },
      customMetadata: { kind },
    });
    return { key, bytes: object.size, kind };
  }

  /** Deletes snapshot objects; a failure leaves them behind (logged), never fails the caller. */
  private async deleteObjects(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.env.WORKSPACES.delete(keys).catch((error: unknown) =>
      console.error(
        JSON.stringify({ level: "error", msg: "could not delete snapshot objects", keys, error: describeError(error) }),
      ),
    );
  }

  /** Extracts the layers in order; the last makes the restored state the runtime's baseline. */
  private async restore(row: SandboxRow, layers: SnapshotLayer[]): Promise<void> {
    for (const [index, layer] of layers.entries()) {
      const object = await this.env.WORKSPACES.get(layer.key);
      if (object === null) throw new Error(`the snapshot layer ${layer.key} is missing from storage`);
      const last = index === layers.length - 1;
      const query = `?layer=true${last ? `&baseline=${encodeURIComponent(layer.key)}` : ""}`;
      const response = await this.backend(row).fetch(
        runtimeRequest(`/archive${query}`, row.runtime_token, {
          method: "PUT",
          body: object.body,
          headers: { "Content-Type": "application/x-tar", "Content-Length": String(object.size) },
        }),
      );
      await response.body?.cancel();
      if (!response.ok) throw new Error(`the runtime answered ${response.status} to the restore`);
    }
  }
}
