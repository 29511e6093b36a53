/**
 * A real git smart-HTTP server for the tests: `git http-backend` (CGI) behind a small Node
 * server on 127.0.0.1 that requires HTTP basic auth with one token, as a git host does. It
 * serves bare repositories made at setup from a few fixture working trees.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";

export interface GitServer {
  url: string;
  token: string;
  close(): Promise<void>;
}

type Tree = Record<string, string>;

/** Fixture repositories: branch name → files (path → content). Scripts are made executable. */
const REPOSITORIES: Record<string, Record<string, Tree>> = {
  "acme/widgets": {
    main: {
      "README.md": "# widgets\n",
      ".openhands/setup.sh":
        '#!/bin/bash\necho "setup ran in $(basename "$PWD") on $(git branch --show-current)"\necho done > .setup-done\n',
      ".openhands/pre-commit.sh": '#!/bin/bash\necho "pre-commit hook ran"\n',
    },
    "feature/login": { "LOGIN.md": "login feature\n" },
  },
  "acme/slow": {
    main: { ".openhands/setup.sh": "#!/bin/bash\necho run >> .setup-runs\nsleep 3\necho slow setup finished\n" },
  },
  "acme/calc": {
    main: {
      "calc.js": "exports.add = (a, b) => a - b;\n",
      "test.js":
        'const assert = require("node:assert");\nconst { add } = require("./calc");\nassert.strictEqual(add(2, 3), 5);\nconsole.log("all tests passed");\n',
    },
  },
  "acme/plain": {
    main: { "README.md": "# plain\n" },
  },
};

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=Fixture", "-c", "user.email=fixture@example.com", ...args], {
    cwd,
    encoding: "utf8",
  });
}

function writeTree(dir: string, tree: Tree): void {
  for (const [path, content] of Object.entries(tree)) {
    const file = join(dir, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, content, { mode: path.endsWith(".sh") ? 0o755 : 0o644 });
  }
}

function makeRepositories(root: string): string {
  const served = join(root, "served");
  for (const [name, branches] of Object.entries(REPOSITORIES)) {
    const work = join(root, "work", name);
    mkdirSync(work, { recursive: true });
    git(work, "init", "--quiet", "--initial-branch=main");
    for (const [branch, tree] of Object.entries(branches)) {
      if (branch !== "main") git(work, "checkout", "--quiet", "-b", branch, "main");
      writeTree(work, tree);
      git(work, "add", "-A");
      git(work, "commit", "--quiet", "-m", `${branch}: fixture`);
    }
    git(work, "checkout", "--quiet", "main");
    const bare = join(served, `${name}.git`);
    mkdirSync(dirname(bare), { recursive: true });
    git(root, "clone", "--quiet", "--bare", work, bare);
  }
  return served;
}

function authorized(req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization ?? "";
  if (!header.startsWith("Basic ")) return false;
  const decoded = Buffer.from(header.slice(6), "base64").toString("utf8");
  return decoded.slice(decoded.indexOf(":") + 1) === token;
}

/** Runs git http-backend for one request and relays its CGI answer. */
function backend(req: IncomingMessage, res: ServerResponse, projectRoot: string): void {
  const url = new URL(req.url ?? "/", "http://git.test");
  const child = spawn("git", ["http-backend"], {
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: "1",
      REQUEST_METHOD: req.method ?? "GET",
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      HTTP_CONTENT_ENCODING: req.headers["content-encoding"] ?? "",
      HTTP_GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
      REMOTE_USER: "fixture",
      REMOTE_ADDR: "127.0.0.1",
    },
    stdio: ["pipe", "pipe", "inherit"],
  });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on("data", (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end === -1) return;
    headersDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString("utf8").split("\r\n")) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  child.on("close", () => res.end());
}

export async function startGitServer(root: string, token: string): Promise<GitServer> {
  const projectRoot = makeRepositories(root);
  const server = createServer((req, res) => {
    if (!authorized(req, token)) {
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="fixture"', "Content-Type": "text/plain" });
      res.end("authentication required\n");
      return;
    }
    backend(req, res, projectRoot);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
