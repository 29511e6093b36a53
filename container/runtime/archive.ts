import { spawn } from "node:child_process";
import { createReadStream, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { copyFile, mkdtemp, rm, stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { RuntimeError } from "./http-util.ts";

function tar(args: string[], stdio: "in" | "none"): { done: Promise<void>; stdin: NodeJS.WritableStream | null } {
  const child = spawn("tar", args, { stdio: [stdio === "in" ? "pipe" : "ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const done = new Promise<void>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0
        ? resolve()
        : reject(new RuntimeError(500, "ARCHIVE_FAILED", `tar exited ${code}: ${stderr.trim().slice(0, 500)}`)),
    );
  });
  return { done, stdin: child.stdin };
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
   * its Content-Length, so that object storage can take it as a stream of known length. It is
   * written to a temp file outside the working directory first. `since` asks for a snapshot
   * layer: the changes since that baseline when it is the runtime's, else a full layer.
   */
  async send(res: ServerResponse, since: string | null): Promise<void> {
    const dir = await mkdtemp(join(this.stateDir, "archive-"));
    const file = join(dir, "workspace.tar");
    try {
      const args = ["-C", this.workdir, "-cf", file];
      let kind: ArchiveKind = "full";
      if (since !== null) {
        // tar updates the snapshot file it is given, so it gets a copy: the baseline stays.
        const listing = join(dir, "listing.snar");
        if (since === this.baseline?.id) {
          await copyFile(this.baseline.file, listing);
          kind = "incremental";
        }
        args.push(`--listed-incremental=${listing}`);
      }
      await tar([...args, "."], "none").done;
      const { size } = await stat(file);
      const headers: Record<string, string | number> = { "Content-Type": "application/x-tar", "Content-Length": size };
      if (since !== null) headers["X-Archive-Kind"] = kind;
      res.writeHead(200, headers);
      await pipeline(createReadStream(file), res);
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
    const extract = tar(args, "in");
    if (extract.stdin === null) throw new Error("tar stdin missing");
    await Promise.all([pipeline(req, extract.stdin), extract.done]);
    if (options.baseline !== null) await this.markBaseline(options.baseline);
  }

  /** Records the working directory's state now as the baseline `id` (tar reads no file content for /dev/null). */
  private async markBaseline(id: string): Promise<void> {
    const file = join(this.stateDir, "baseline.snar");
    this.baseline = null;
    await rm(file, { force: true });
    await tar(["-C", this.workdir, "-cf", "/dev/null", `--listed-incremental=${file}`, "."], "none").done;
    this.baseline = { id, file };
  }
}
