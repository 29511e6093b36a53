/**
 * The sandbox runtime: a small HTTP server that runs inside each sandbox (a container in
 * production, a local process in development and tests) and does what the platform asks of
 * the sandbox. Its API is documented in container/README.md. It trusts no caller without the
 * token it was started with (SANDBOX_RUNTIME_TOKEN), and never hands that token to commands.
 */
import { randomUUID, timingSafeEqual } from "node:crypto";
import { mkdirSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { Archives } from "./archive.ts";
import { runCommand } from "./exec.ts";
import { deletePath, listDirectory, resolvePath, sendFile, statFile, writeFileFromRequest } from "./files.ts";
import { optionalEnv, optionalNumber, RuntimeError, readJson, requireString, sendJson } from "./http-util.ts";
import { ShellSession } from "./shell-session.ts";

const token = process.env.SANDBOX_RUNTIME_TOKEN ?? "";
if (token.length < 16) {
  console.error("SANDBOX_RUNTIME_TOKEN must be set (16+ characters)");
  process.exit(2);
}
const workdir = process.env.WORKDIR ?? "/workspace";
const host = process.env.HOST ?? "0.0.0.0";
const port = Number(process.env.PORT ?? 8080);
const DEFAULT_TIMEOUT_MS = 120_000;
const MAX_TIMEOUT_MS = 3_600_000;
const MAX_SESSIONS = 32;
const started = Date.now();

mkdirSync(workdir, { recursive: true });

/** What commands see: our environment without the runtime's own secret and settings. */
const commandEnv: NodeJS.ProcessEnv = { ...process.env };
for (const name of ["SANDBOX_RUNTIME_TOKEN", "PORT", "HOST", "RUNTIME_STATE_DIR"]) delete commandEnv[name];

const sessions = new Map<string, ShellSession>();
const archives = new Archives(workdir, process.env.RUNTIME_STATE_DIR || undefined);

function authorized(req: IncomingMessage): boolean {
  const header = req.headers.authorization;
  const presented = header?.startsWith("Bearer ")
    ? header.slice(7).trim()
    : (req.headers["x-session-api-key"] as string | undefined);
  if (!presented) return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function execRequest(body: Record<string, unknown>) {
  const hasArgv = body.argv !== undefined;
  const hasCommand = body.command !== undefined;
  if (hasArgv === hasCommand)
    throw new RuntimeError(
      422,
      "VALIDATION_ERROR",
      "Give exactly one of 'argv' (array of strings) and 'command' (shell string).",
    );
  if (hasArgv && (!Array.isArray(body.argv) || body.argv.length === 0 || !body.argv.every((part) => typeof part === "string"))) {
    throw new RuntimeError(422, "VALIDATION_ERROR", "'argv' must be a non-empty array of strings.");
  }
  if (body.stdin !== undefined && typeof body.stdin !== "string")
    throw new RuntimeError(422, "VALIDATION_ERROR", "'stdin' must be a string.");
  return {
    argv: hasArgv ? (body.argv as string[]) : undefined,
    command: hasCommand ? requireString(body.command, "command") : undefined,
    cwd: resolvePath(workdir, typeof body.cwd === "string" && body.cwd !== "" ? body.cwd : "."),
    env: optionalEnv(body.env),
    timeoutMs: optionalNumber(body.timeout_ms, "timeout_ms", 1, MAX_TIMEOUT_MS) ?? DEFAULT_TIMEOUT_MS,
    stdin: body.stdin as string | undefined,
  };
}

function session(id: string): ShellSession {
  const found = sessions.get(id);
  if (!found) throw new RuntimeError(404, "SESSION_NOT_FOUND", `No shell session ${id}.`);
  return found;
}

function proxy(req: IncomingMessage, res: ServerResponse, targetPort: number, path: string): void {
  const headers = { ...req.headers };
  delete headers.authorization;
  delete headers["x-session-api-key"];
  headers.host = `127.0.0.1:${targetPort}`;
  const upstream = httpRequest({ host: "127.0.0.1", port: targetPort, method: req.method, path, headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on("error", (error) => {
    if (!res.headersSent)
      sendJson(res, 502, { detail: `Nothing answers on port ${targetPort}: ${error.message}`, code: "APP_PORT_UNREACHABLE" });
    else res.destroy();
  });
  req.pipe(upstream);
}

async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://runtime");
  const path = url.pathname;
  const method = req.method ?? "GET";
  if (path === "/health" && method === "GET") {
    sendJson(res, 200, { status: "ok", workdir, uptime_ms: Date.now() - started });
    return;
  }
  if (!authorized(req)) throw new RuntimeError(401, "INVALID_RUNTIME_TOKEN", "Missing or wrong runtime token.");

  const proxyMatch = /^\/proxy\/(\d{1,5})(\/.*)?$/.exec(path);
  if (proxyMatch) {
    const targetPort = Number(proxyMatch[1]);
    if (targetPort < 1 || targetPort > 65535) throw new RuntimeError(422, "VALIDATION_ERROR", "Port must be 1 to 65535.");
    proxy(req, res, targetPort, `${proxyMatch[2] ?? "/"}${url.search}`);
    return;
  }
  const sessionMatch = /^\/sessions\/([\w-]+)(\/run)?$/.exec(path);

  switch (`${method} ${sessionMatch ? (sessionMatch[2] ? "/sessions/:id/run" : "/sessions/:id") : path}`) {
    case "POST /exec": {
      sendJson(res, 200, await runCommand(execRequest(await readJson(req)), commandEnv));
      return;
    }
    case "POST /exec/stream": {
      const request = execRequest(await readJson(req));
      res.writeHead(200, { "Content-Type": "application/x-ndjson", "Cache-Control": "no-store" });
      const result = await runCommand(request, commandEnv, (stream, data) =>
        res.write(`${JSON.stringify({ type: stream, data })}\n`),
      );
      res.end(
        `${JSON.stringify({ type: "exit", exit_code: result.exit_code, signal: result.signal, timed_out: result.timed_out, duration_ms: result.duration_ms })}\n`,
      );
      return;
    }
    case "GET /sessions":
      sendJson(res, 200, { items: [...sessions.values()].map((s) => ({ id: s.id, alive: s.alive })) });
      return;
    case "POST /sessions": {
      const body = await readJson<Record<string, unknown>>(req);
      if (sessions.size >= MAX_SESSIONS)
        throw new RuntimeError(429, "TOO_MANY_SESSIONS", `At most ${MAX_SESSIONS} shell sessions; delete one first.`);
      const id = typeof body.id === "string" && /^[\w-]{1,64}$/.test(body.id) ? body.id : randomUUID();
      if (!sessions.has(id)) {
        const cwd = resolvePath(workdir, typeof body.cwd === "string" && body.cwd !== "" ? body.cwd : ".");
        sessions.set(id, new ShellSession(id, cwd, { ...commandEnv, ...optionalEnv(body.env) }));
      }
      sendJson(res, 201, { id });
      return;
    }
    case "POST /sessions/:id/run": {
      const target = session(sessionMatch?.[1] ?? "");
      const body = await readJson<Record<string, unknown>>(req);
      const timeoutMs = optionalNumber(body.timeout_ms, "timeout_ms", 1, MAX_TIMEOUT_MS) ?? DEFAULT_TIMEOUT_MS;
      sendJson(res, 200, await target.run(requireString(body.command, "command"), timeoutMs));
      return;
    }
    case "DELETE /sessions/:id": {
      const target = session(sessionMatch?.[1] ?? "");
      target.close();
      sessions.delete(target.id);
      sendJson(res, 200, { success: true });
      return;
    }
    case "GET /files":
      await sendFile(res, resolvePath(workdir, url.searchParams.get("path")));
      return;
    case "PUT /files":
      sendJson(
        res,
        200,
        await writeFileFromRequest(req, resolvePath(workdir, url.searchParams.get("path")), url.searchParams.get("mode")),
      );
      return;
    case "DELETE /files":
      await deletePath(resolvePath(workdir, url.searchParams.get("path")), url.searchParams.get("recursive") === "true");
      sendJson(res, 200, { success: true });
      return;
    case "GET /files/stat":
      sendJson(res, 200, await statFile(resolvePath(workdir, url.searchParams.get("path"))));
      return;
    case "GET /files/list":
      sendJson(res, 200, await listDirectory(resolvePath(workdir, url.searchParams.get("path") ?? ".")));
      return;
    case "GET /archive":
      await archives.send(res, url.searchParams.get("since"), { spool: url.searchParams.get("spool") === "true" });
      return;
    case "PUT /archive": {
      const baseline = url.searchParams.get("baseline");
      if (baseline !== null && !/^[\w./-]{1,200}$/.test(baseline))
        throw new RuntimeError(422, "VALIDATION_ERROR", "baseline must be 1 to 200 letters, digits, '.', '/', '_' or '-'.");
      await archives.restore(req, { layer: url.searchParams.get("layer") === "true", baseline });
      sendJson(res, 200, { success: true });
      return;
    }
    default:
      throw new RuntimeError(404, "NOT_FOUND", `No runtime route ${method} ${path}.`);
  }
}

const server = createServer((req, res) => {
  route(req, res).catch((error: unknown) => {
    const known = error instanceof RuntimeError;
    if (!known) console.error(JSON.stringify({ level: "error", msg: "runtime error", error: String(error) }));
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendJson(res, known ? error.status : 500, {
      detail: known ? error.message : "Internal runtime error.",
      code: known ? error.code : "RUNTIME_ERROR",
    });
  });
});

server.listen(port, host, () => {
  const address = server.address();
  const actual = typeof address === "object" && address !== null ? address.port : port;
  // The local sandbox host waits for this line to learn the port (PORT=0 picks a free one).
  console.log(`SANDBOX_RUNTIME_READY port=${actual}`);
});

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    for (const s of sessions.values()) s.close();
    archives.dispose();
    server.close();
    process.exit(0);
  });
}
