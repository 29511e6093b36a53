import { spawn } from "node:child_process";
import { createReadStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
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

/**
 * Sends a tar archive of the working directory (modes, symlinks and empty directories kept)
 * with its Content-Length, so that object storage can take it as a stream of known length.
 * The archive is written to a temp file outside the working directory first.
 */
export async function sendArchive(res: ServerResponse, workdir: string): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "sandbox-archive-"));
  const file = join(dir, "workspace.tar");
  try {
    await tar(["-C", workdir, "-cf", file, "."], "none").done;
    const { size } = await stat(file);
    res.writeHead(200, { "Content-Type": "application/x-tar", "Content-Length": size });
    await pipeline(createReadStream(file), res);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Extracts a tar archive from the request body into the working directory. */
export async function restoreArchive(req: IncomingMessage, workdir: string): Promise<void> {
  const extract = tar(["-C", workdir, "-xpf", "-"], "in");
  if (extract.stdin === null) throw new Error("tar stdin missing");
  await Promise.all([pipeline(req, extract.stdin), extract.done]);
}
