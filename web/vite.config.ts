import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

// The web console: built into web/dist, which the Worker serves as static assets (wrangler.toml).
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  build: { outDir: "dist", emptyOutDir: true, target: "es2022" },
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
});
