// Completes package-lock.json with the other platforms' optional native packages
// (@biomejs/cli-*, @cloudflare/workerd-*, ...). The npm registry mirror this project is built
// against lacks some of them at the versions we use, so `npm install` leaves them out, and
// `npm ci` then refuses the lockfile as out of sync. Each entry written here carries only the
// version and the os/cpu/libc that rule it out on other machines, so npm never fetches it
// where it does not apply. Run after `npm install` changes the lockfile: `npm run lock`.
import { readFileSync, writeFileSync } from "node:fs";

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
const OS = ["android", "darwin", "freebsd", "linux", "netbsd", "openbsd", "sunos", "win32", "aix", "openharmony"];
const CPU = ["arm64", "x64", "arm", "ia32", "ppc64", "s390x", "riscv64", "loong64", "mips64el", "wasm32"];

function platformOf(name) {
  const parts = name.split("/").pop().split("-");
  const os = parts.find((part) => OS.includes(part) || part === "windows");
  const cpu = parts.find((part) => CPU.includes(part)) ?? (parts.includes("64") ? "x64" : undefined);
  if (os === undefined || cpu === undefined) return null;
  const entry = { os: [os === "windows" ? "win32" : os], cpu: [cpu] };
  if (parts.includes("musl")) entry.libc = ["musl"];
  return entry;
}

let added = 0;
for (const [location, entry] of Object.entries(lock.packages)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const base = location === "" ? "" : `${location}/`;
    const candidates = [`${base}node_modules/${name}`, `node_modules/${name}`];
    if (candidates.some((candidate) => lock.packages[candidate])) continue;
    const platform = platformOf(name);
    if (platform === null) continue;
    lock.packages[candidates[0]] = { version: range.replace(/^[\^~=]/, ""), ...platform, optional: true };
    added++;
  }
}
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`complete-lockfile: added ${added} platform entries`);
