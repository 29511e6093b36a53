/**
 * Sandbox benchmarks on the local backend, each against its floor measured in the same run:
 *   1. start → RUNNING through the API   vs  spawning the runtime directly and waiting for /health
 *   2. a trivial command via the proxy   vs  the same call straight to the runtime (p50)
 *   3. pause + resume of a 50 MB mixed workspace  vs  tar of the same directory out and back
 *      (and, for context, the same archive through a bare Worker into the local R2 simulator and back)
 * Run: npm run bench:sandboxes   (writes bench/results/sandboxes.md)
 */
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createReadStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import {
  benchHost,
  describeHost,
  machine,
  ms,
  percentile,
  ROOT,
  spawnFloorRuntime,
  startSandboxHostProcess,
  startWorker,
  FLOOR_TOKEN as TOKEN,
  waitFor,
} from "./lib.ts";

const START_RUNS = 10;
const EXEC_RUNS = 200;
const SNAPSHOT_RUNS = 5;

const scratch = mkdtempSync(join(tmpdir(), "bench-sandboxes-"));
const host = await startSandboxHostProcess(join(scratch, "sandboxes"), 8781);
const worker = await startWorker(8790, join(scratch, "state"), { LOCAL_SANDBOX_HOST_URL: host.url });
const api = (path: string, init?: RequestInit) => fetch(`${worker.url}/api/v1${path}`, init);
// A bare Worker in front of the local R2 simulator, run the same way: the storage floor.
const storageWorker = await startWorker(
  8791,
  join(scratch, "floor-state"),
  {},
  { config: join(ROOT, "bench", "floor-worker", "wrangler.toml") },
);

interface Info {
  id: string;
  status: string;
  session_api_key: string | null;
}

async function info(id: string): Promise<Info> {
  const [found] = (await (await api(`/sandboxes?id=${id}`)).json()) as Info[];
  if (!found) throw new Error(`sandbox ${id} vanished`);
  return found;
}

async function untilStatus(id: string, status: string): Promise<Info> {
  let last: Info | null = null;
  await waitFor(
    async () => {
      last = await info(id);
      return last.status === status;
    },
    60_000,
    2,
  );
  return last as unknown as Info;
}

// 1. Start to RUNNING ------------------------------------------------------------------------
async function floorStart(): Promise<number> {
  const dir = mkdtempSync(join(scratch, "floor-"));
  const t0 = performance.now();
  const { port, child } = await spawnFloorRuntime(dir);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok, 10_000, 2);
  const elapsed = performance.now() - t0;
  child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
  return elapsed;
}

async function apiStart(): Promise<number> {
  const t0 = performance.now();
  const started = (await (await api("/sandboxes?sandbox_spec_id=slim", { method: "POST" })).json()) as Info;
  await untilStatus(started.id, "RUNNING");
  const elapsed = performance.now() - t0;
  await api(`/sandboxes/${started.id}`, { method: "DELETE" });
  return elapsed;
}

await apiStart();
await floorStart();
const floorStarts: number[] = [];
const apiStarts: number[] = [];
for (let i = 0; i < START_RUNS; i++) {
  floorStarts.push(await floorStart());
  apiStarts.push(await apiStart());
}

// 2. A trivial command ---------------------------------------------------------------------
const sandbox = (await (await api("/sandboxes?sandbox_spec_id=slim", { method: "POST" })).json()) as Info;
const running = await untilStatus(sandbox.id, "RUNNING");
const execBody = JSON.stringify({ argv: ["true"] });

async function timeCalls(url: string, headers: Record<string, string>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < EXEC_RUNS + 20; i++) {
    const t0 = performance.now();
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: execBody,
    });
    await response.json();
    if (i >= 20) times.push(performance.now() - t0);
  }
  return times;
}
// The platform keeps the runtime's token to itself, so the floor is a second runtime started the
// same way with a known token.
const floorDir = mkdtempSync(join(scratch, "exec-floor-"));
const { port: floorPort, child: floorChild } = await spawnFloorRuntime(floorDir);
async function timeHealth(): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < EXEC_RUNS + 20; i++) {
    const t0 = performance.now();
    await (await fetch(`${worker.url}/health`)).text();
    if (i >= 20) times.push(performance.now() - t0);
  }
  return times;
}
const bareWorker = await timeHealth();
const directExec = await timeCalls(`http://127.0.0.1:${floorPort}/exec`, { Authorization: `Bearer ${TOKEN}` });
const proxiedExec = await timeCalls(`${worker.url}/api/v1/sandboxes/${running.id}/runtime/exec`, {
  "X-Session-API-Key": running.session_api_key ?? "",
});
floorChild.kill("SIGKILL");

// 3. Pause + resume of a 50 MB mixed workspace -----------------------------------------------
function fillWorkspace(dir: string): number {
  let bytes = 0;
  for (let i = 0; i < 600; i++) {
    const sub = join(dir, "src", `pkg${i % 20}`);
    mkdirSync(sub, { recursive: true });
    const text = `// file ${i}\n${"export const value = 'lorem ipsum dolor sit amet';\n".repeat(40 + (i % 200))}`;
    writeFileSync(join(sub, `module${i}.ts`), text);
    bytes += text.length;
  }
  mkdirSync(join(dir, "assets"), { recursive: true });
  for (let i = 0; i < 10; i++) {
    const blob = randomBytes(4 * 1024 * 1024);
    writeFileSync(join(dir, "assets", `blob${i}.bin`), blob, { mode: 0o640 });
    bytes += blob.length;
  }
  return bytes;
}

/** The floor: tar of the directory out to a file and back into an empty one. */
function tarOutAndBack(dir: string): number {
  const archive = join(scratch, "floor.tar");
  const restored = mkdtempSync(join(scratch, "restored-"));
  const t0 = performance.now();
  execFileSync("tar", ["-C", dir, "-cf", archive, "."]);
  execFileSync("tar", ["-C", restored, "-xpf", archive]);
  const elapsed = performance.now() - t0;
  rmSync(restored, { recursive: true, force: true });
  rmSync(archive, { force: true });
  return elapsed;
}

/**
 * Context for the floor: the snapshot's storage path with nothing else on the way. tar out to a
 * file, which a plain HTTP server here serves as the runtime does; a bare Worker streams it into
 * the local R2 simulator, then streams the object back in a PUT to this server, which pipes it
 * into tar. What any design that keeps snapshots in local R2 pays, before any state or runtime.
 */
let relayTarget = "";
const relay = createServer((req, res) => {
  if (req.method === "GET") {
    const archive = join(scratch, "floor-r2.tar");
    res.writeHead(200, { "Content-Type": "application/x-tar", "Content-Length": statSync(archive).size });
    void pipeline(createReadStream(archive), res);
    return;
  }
  const extract = spawn("tar", ["-C", relayTarget, "-xpf", "-"], { stdio: ["pipe", "ignore", "inherit"] });
  extract.on("close", (code) => res.writeHead(code === 0 ? 200 : 500).end());
  void pipeline(req, extract.stdin);
});
await new Promise<void>((resolve) => relay.listen(8792, "127.0.0.1", resolve));
const relayUrl = "http://127.0.0.1:8792";

async function tarThroughR2(dir: string, round: number): Promise<number> {
  const archive = join(scratch, "floor-r2.tar");
  relayTarget = mkdtempSync(join(scratch, "restored-r2-"));
  const t0 = performance.now();
  execFileSync("tar", ["-C", dir, "-cf", archive, "."]);
  const object = `${storageWorker.url}/object/round-${round}`;
  const put = await fetch(`${object}?from=${encodeURIComponent(relayUrl)}`, { method: "POST" });
  if (!put.ok) throw new Error(`bare R2 put failed: ${put.status}`);
  await put.arrayBuffer();
  const got = await fetch(`${object}?to=${encodeURIComponent(relayUrl)}`, { method: "POST" });
  if (!got.ok) throw new Error(`bare R2 restore failed: ${got.status}`);
  await got.arrayBuffer();
  const elapsed = performance.now() - t0;
  rmSync(relayTarget, { recursive: true, force: true });
  rmSync(archive, { force: true });
  return elapsed;
}

async function pauseAndResume(id: string): Promise<number> {
  const t0 = performance.now();
  const paused = await api(`/sandboxes/${id}/pause`, { method: "POST" });
  if (!paused.ok) throw new Error(`pause failed: ${await paused.text()}`);
  await api(`/sandboxes/${id}/resume`, { method: "POST" });
  await untilStatus(id, "RUNNING");
  return performance.now() - t0;
}

/** A session's work between pauses: 20 source files edited, one added, one 1 MiB asset added. */
function editWorkspace(dir: string, round: number): void {
  for (let i = 0; i < 20; i++) {
    const file = join(dir, "src", `pkg${i % 20}`, `module${i}.ts`);
    writeFileSync(file, `// edited in round ${round}\n${"export const edited = true;\n".repeat(50)}`);
  }
  writeFileSync(join(dir, "src", `added${round}.ts`), "export const added = 1;\n");
  writeFileSync(join(dir, "assets", `added${round}.bin`), randomBytes(1024 * 1024));
}

// Each run: a fresh sandbox with a fresh workspace; its first pause uploads it all, the next
// one (after some edits) only the changes.
const floorSnapshots: number[] = [];
const r2Snapshots: number[] = [];
const firstSnapshots: number[] = [];
const floorAfterEdits: number[] = [];
const laterSnapshots: number[] = [];
let workspaceBytes = 0;
let workspace = "";
for (let i = 0; i < SNAPSHOT_RUNS; i++) {
  const fresh = (await (await api("/sandboxes?sandbox_spec_id=slim", { method: "POST" })).json()) as Info;
  await untilStatus(fresh.id, "RUNNING");
  workspace = join(scratch, "sandboxes", fresh.id, "workspace");
  workspaceBytes = fillWorkspace(workspace);
  floorSnapshots.push(tarOutAndBack(workspace));
  r2Snapshots.push(await tarThroughR2(workspace, i));
  firstSnapshots.push(await pauseAndResume(fresh.id));
  editWorkspace(workspace, i);
  floorAfterEdits.push(tarOutAndBack(workspace));
  laterSnapshots.push(await pauseAndResume(fresh.id));
  if (i < SNAPSHOT_RUNS - 1) await api(`/sandboxes/${fresh.id}`, { method: "DELETE" });
}
const check = execFileSync("du", ["-sb", workspace]).toString().split("\t")[0];

await worker.stop();
await storageWorker.stop();
relay.close();
await host.close();
rmSync(scratch, { recursive: true, force: true });

// Report -------------------------------------------------------------------------------------
const startFloor = percentile(floorStarts, 50);
const startApi = percentile(apiStarts, 50);
const execFloor = percentile(directExec, 50);
const execApi = percentile(proxiedExec, 50);
const snapFloor = percentile(floorSnapshots, 50);
const snapApi = percentile(firstSnapshots, 50);
const snapR2 = percentile(r2Snapshots, 50);
const laterFloor = percentile(floorAfterEdits, 50);
const laterApi = percentile(laterSnapshots, 50);
const verdict = (ratio: number, target: number) =>
  `${ratio.toFixed(2)}× (target ≤ ${target}×: ${ratio <= target ? "met" : "NOT met"})`;
const report = `# Sandbox benchmarks (local backend)

Machine: ${machine()}. Run: ${new Date().toISOString()}. \`npm run bench:sandboxes\` (${describeHost(benchHost())}; local sandbox host).

| measure | floor (same run) | through the platform | ratio |
|---|---|---|---|
| start → RUNNING, median of ${START_RUNS} | spawn runtime + /health: ${ms(startFloor)} | POST /sandboxes → RUNNING: ${ms(startApi)} | ${verdict(startApi / startFloor, 1.5)} |
| trivial command (\`true\`), p50 of ${EXEC_RUNS} | straight to the runtime: ${ms(execFloor)} (p99 ${ms(percentile(directExec, 99))}) | via the API proxy: ${ms(execApi)} (p99 ${ms(percentile(proxiedExec, 99))}) | ${verdict(execApi / execFloor, 2)} |
| first pause + resume of a fresh ${(workspaceBytes / 2 ** 20).toFixed(1)} MiB workspace (600 text files + 10 × 4 MiB binary): a full snapshot, median of ${SNAPSHOT_RUNS} | tar out + tar back: ${ms(snapFloor)} | pause (snapshot to R2, stop) + resume (start, restore) → RUNNING: ${ms(snapApi)} | ${verdict(snapApi / snapFloor, 2)} |
| the next pause + resume, after 20 files edited and 1 MiB added: changes only, median of ${SNAPSHOT_RUNS} | tar out + tar back: ${ms(laterFloor)} | ${ms(laterApi)} | ${verdict(laterApi / laterFloor, 2)} |

Context for the first pause + resume: the snapshot's storage path alone (tar out, served over HTTP
to a bare Worker that streams it into the local R2 simulator, then streams it back into tar in;
bench/floor-worker) takes ${ms(snapR2)} in this
run (median of ${SNAPSHOT_RUNS}; runs: ${r2Snapshots.map((value) => value.toFixed(0)).join(", ")} ms), so the platform's own cost above
that storage floor is ${ms(snapApi - snapR2)} (${(snapApi / snapR2).toFixed(2)}×): stopping the runtime, starting a fresh one, the
state changes and polling for RUNNING. Runs of the platform: ${firstSnapshots.map((value) => value.toFixed(0)).join(", ")} ms; of tar: ${floorSnapshots.map((value) => value.toFixed(0)).join(", ")} ms.

Context for the proxy row: a bare \`GET /health\` of the same Worker on the same host takes ${ms(percentile(bareWorker, 50))} p50 (p99 ${ms(percentile(bareWorker, 99))}) on this
machine, so the proxy's own cost above the Worker's ingress and the runtime is about
${ms(execApi - percentile(bareWorker, 50) - execFloor)} per call.

Workspace after the last resume: ${check} bytes on disk.
`;
writeFileSync(join(ROOT, "bench", "results", "sandboxes.md"), report);
console.log(report);
