import { createReadStream } from "node:fs";
import { chmod, lstat, mkdir, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { RuntimeError, readBody } from "./http-util.ts";

export const MAX_FILE_BYTES = 64 * 1024 * 1024;

export interface FileStat {
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  mode: string;
  modified_at: string;
}

/** Relative paths are under the working directory; absolute ones are taken as they are. */
export function resolvePath(workdir: string, raw: string | null): string {
  if (raw === null || raw.length === 0)
    throw new RuntimeError(422, "VALIDATION_ERROR", "The 'path' query parameter is required.");
  if (raw.includes("\0")) throw new RuntimeError(422, "VALIDATION_ERROR", "'path' must not contain NUL.");
  return isAbsolute(raw) ? resolve(raw) : resolve(workdir, raw);
}

function describe(path: string, info: Awaited<ReturnType<typeof lstat>>): FileStat {
  const type = info.isFile() ? "file" : info.isDirectory() ? "directory" : info.isSymbolicLink() ? "symlink" : "other";
  return {
    path,
    type,
    size: Number(info.size),
    mode: (Number(info.mode) & 0o7777).toString(8).padStart(4, "0"),
    modified_at: info.mtime.toISOString(),
  };
}

function notFound(path: string): RuntimeError {
  return new RuntimeError(404, "FILE_NOT_FOUND", `No such file or directory: ${path}`);
}

async function statOrThrow(path: string) {
  try {
    return await lstat(path);
  } catch {
    throw notFound(path);
  }
}

export async function statFile(path: string): Promise<FileStat> {
  return describe(path, await statOrThrow(path));
}

export async function listDirectory(path: string): Promise<{ path: string; entries: FileStat[] }> {
  const info = await statOrThrow(path);
  if (!info.isDirectory()) throw new RuntimeError(409, "NOT_A_DIRECTORY", `Not a directory: ${path}`);
  const names = (await readdir(path)).sort();
  const entries: FileStat[] = [];
  for (const name of names) {
    try {
      entries.push({ ...describe(join(path, name), await lstat(join(path, name))) });
    } catch {
      // Removed while listing.
    }
  }
  return { path, entries };
}

/** Streams a file's bytes, with its mode and size in headers. */
export async function sendFile(res: ServerResponse, path: string): Promise<void> {
  const info = await stat(path).catch(() => {
    throw notFound(path);
  });
  if (!info.isFile()) throw new RuntimeError(409, "NOT_A_FILE", `Not a regular file: ${path}`);
  if (info.size > MAX_FILE_BYTES)
    throw new RuntimeError(413, "TOO_LARGE", `File is ${info.size} bytes; the limit is ${MAX_FILE_BYTES}.`);
  res.writeHead(200, {
    "Content-Type": "application/octet-stream",
    "Content-Length": info.size,
    "X-File-Mode": (info.mode & 0o7777).toString(8).padStart(4, "0"),
  });
  createReadStream(path).pipe(res);
}

function parseMode(raw: string | null): number | undefined {
  if (raw === null || raw === "") return undefined;
  if (!/^[0-7]{3,4}$/.test(raw)) throw new RuntimeError(422, "VALIDATION_ERROR", "'mode' must be octal, e.g. 0644 or 755.");
  return Number.parseInt(raw, 8);
}

/** Writes the body to `path` atomically (temp file + rename), creating parent directories. */
export async function writeFileFromRequest(req: IncomingMessage, path: string, rawMode: string | null): Promise<FileStat> {
  const mode = parseMode(rawMode);
  const body = await readBody(req, MAX_FILE_BYTES);
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.tmp-${process.pid}-${Date.now()}`;
  await writeFile(temp, body, { mode: mode ?? 0o644 });
  if (mode !== undefined) await chmod(temp, mode);
  await rename(temp, path);
  return statFile(path);
}

export async function deletePath(path: string, recursive: boolean): Promise<void> {
  const info = await statOrThrow(path);
  if (info.isDirectory() && !recursive) {
    const entries = await readdir(path);
    if (entries.length > 0)
      throw new RuntimeError(409, "DIRECTORY_NOT_EMPTY", `Directory not empty (pass recursive=true): ${path}`);
  }
  await rm(path, { recursive: true, force: true });
}
