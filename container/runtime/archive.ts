import { spawn } from "node:child_process";
import { createReadStream, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { copyFile, mkdtemp, rm, stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { RuntimeError } from "./http-util.ts";

interface TarRun {
  /** Resolves with tar's stderr (warnings, `--totals`) once it exits successfully. */
  done: Promise<string>;
  stdin: NodeJS.WritableStream | null;
  stdout: NodeJS.ReadableStream | null;
}

/**
 * Runs GNU tar. When creating, exit status 1 means some file changed while it was read: the
 * archive is still whole (tar archives what it stat'ed, padding a file that shrank), so it is
 * taken; a sandbox with a process still writing its log must be able to pause.
 */
function tar(args: string[], stdio: { stdin?: boolean; stdout?: boolean } = {}): TarRun {
  const creating = args.includes("-cf");
  const child = spawn("tar", args, {
    // The C locale: `--totals` is parsed, and must not come translated.
    env: { ...process.env, LC_ALL: "C" },
    stdio: [stdio.stdin ? "pipe" : "ignore", stdio.stdout ? "pipe" : "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const done = new Promise<string>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 || (code === 1 && creating)
        ? resolve(stderr)
        : reject(new RuntimeError(500, "ARCHIVE_FAILED", `tar exited ${code}: ${stderr.trim().slice(0, 500)}`)),
    );
  });
  return { done, stdin: child.stdin, stdout: child.stdout };
}

/**
 * Passes a stream through when it is exactly `length` bytes long and `finished` resolves, and
 * fails otherwise, holding its last byte back until it knows: a receiver of the declared
 * length never gets a whole body that is not the real archive.
 */
export async function* exactLength(
  source: AsyncIterable<Buffer>,
  length: number,
  finished: Promise<unknown>,
): AsyncGenerator<Buffer> {
  let sent = 0;
  let held: Buffer[] = [];
  let heldBytes = 0;
  for await (const chunk of source) {
    const room = Math.max(0, length - 1 - sent);
    if (room > 0) {
      const head = chunk.subarray(0, room);
      sent += head.length;
      yield head;
    }
    if (chunk.length > room) {
      held.push(chunk.subarray(room));
      heldBytes += chunk.length - room;
    }
    if (sent + heldBytes > length) throw new Error(`the archive outgrew its declared ${length} bytes`);
  }
  await finished;
  if (sent + heldBytes !== length) throw new Error(`the archive has ${sent + heldBytes} bytes, not the declared ${length}`);
  const tail = Buffer.concat(held);
  held = [];
  yield tail;
}

/** The kind of archive a snapshot request got: everything, or the changes since its baseline. */
export type ArchiveKind = "full" | "incremental";

/**
 * Archives of the working directory: plain ones, and the layered snapshots the platform keeps
 * across pauses (GNU tar's listed-incremental format).
 *
 * A snapshot layer is a full archive or the changes since a baseline: the state the working
 * directory had when it was last restored from the platform's snapshot (named by the id the
 * platform gave it). Changes are found by ctime and mtime, so an edit that keeps a file's old
 * mtime is still seen; deleted files and directories are recorded in the layer, and extracting
 * the layers in order deletes them again. The baseline is GNU tar's snapshot file, kept outside
 * the working directory and lost with the process: a runtime without one answers a full layer.
 */
export class Archives {
  private readonly workdir: string;
  private readonly stateDir: string;
  private baseline: { id: string; file: string } | null = null;

  /** `stateRoot`: where the runtime's private files go (outside the working directory). */
  constructor(workdir: string, stateRoot: string = tmpdir()) {
    this.workdir = workdir;
    mkdirSync(stateRoot, { recursive: true });
    this.stateDir = mkdtempSync(join(stateRoot, "sandbox-runtime-"));
  }

  /** Removes the runtime's private files (on exit). */
  dispose(): void {
    rmSync(this.stateDir, { recursive: true, force: true });
  }

  /**
   * Sends an archive of the working directory (modes, symlinks and empty directories kept) with
   * its Content-Length, so that object storage can take it as a stream of known length. `since`
   * asks for a snapshot layer: the changes since that baseline when it is the runtime's, else a
   * full layer.
   *
   * By default the archive streams as tar writes it, its length learnt first from a dry run
   * (tar reads no file content when the archive is /dev/null). Should the files change in
   * between so that the length differs, the connection is cut before the last byte: the client
   * asks again with `spool`, which writes the archive to a temp file first and sends that.
   */
  async send(res: ServerResponse, since: string | null, options: { spool: boolean } = { spool: false }): Promise<void> {
    const dir = await mkdtemp(join(this.stateDir, "archive-"));
    const baseline = since !== null && since === this.baseline?.id ? this.baseline : null;
    const kind: ArchiveKind = baseline !== null ? "incremental" : "full";
    // tar updates the listing it is given, so each run gets its own copy: the baseline stays.
    const listing = async (name: string): Promise<string[]> => {
      if (since === null) return [];
      const file = join(dir, name);
      if (baseline !== null) await copyFile(baseline.file, file);
      return [`--listed-incremental=${file}`];
    };
    const respond = (length: number) => {
      const headers: Record<string, string | number> = { "Content-Type": "application/x-tar", "Content-Length": length };
      if (since !== null) headers["X-Archive-Kind"] = kind;
      res.writeHead(200, headers);
    };
    try {
      if (options.spool) {
        const file = join(dir, "workspace.tar");
        await tar(["-C", this.workdir, "-cf", file, ...(await listing("spool.snar")), "."]).done;
        respond((await stat(file)).size);
        await pipeline(createReadStream(file), res);
        return;
      }
      const totals = await tar(["-C", this.workdir, "-cf", "/dev/null", "--totals", ...(await listing("dry.snar")), "."]).done;
      const length = Number(/Total bytes written: (\d+)/.exec(totals)?.[1] ?? Number.NaN);
      if (!Number.isSafeInteger(length) || length <= 0)
        throw new RuntimeError(500, "ARCHIVE_FAILED", `tar did not report the archive's size: ${totals.trim().slice(0, 200)}`);
      const create = tar(["-C", this.workdir, "-cf", "-", ...(await listing("stream.snar")), "."], { stdout: true });
      if (create.stdout === null) throw new Error("tar stdout missing");
      // Awaited by exactLength; a failure it never reaches (the stream broke first) must not crash the runtime.
      create.done.catch(() => undefined);
      respond(length);
      await pipeline(create.stdout as AsyncIterable<Buffer>, (source) => exactLength(source, length, create.done), res);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * Extracts an archive from the request body into the working directory. A snapshot layer
   * (`layer`) also applies the deletions it records; `baseline` (with the last layer) makes the
   * restored state the baseline the next snapshot's changes are taken against.
   */
  async restore(req: IncomingMessage, options: { layer: boolean; baseline: string | null }): Promise<void> {
    const args = ["-C", this.workdir, "-xpf", "-"];
    if (options.layer) args.push("--listed-incremental=/dev/null");
    const extract = tar(args, { stdin: true });
    if (extract.stdin === null) throw new Error("tar stdin missing");
    await Promise.all([pipeline(req, extract.stdin), extract.done]);
    if (options.baseline !== null) await this.markBaseline(options.baseline);
  }

  /** Records the working directory's state now as the baseline `id` (tar reads no file content for /dev/null). */
  private async markBaseline(id: string): Promise<void> {
    const file = join(this.stateDir, "baseline.snar");
    this.baseline = null;
    await rm(file, { force: true });
    await tar(["-C", this.workdir, "-cf", "/dev/null", `--listed-incremental=${file}`, "."]).done;
    this.baseline = { id, file };
  }
}
