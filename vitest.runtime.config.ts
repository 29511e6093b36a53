import { defineConfig } from "vitest/config";

// Unit tests of the sandbox runtime's modules, in Node (the runtime is a Node program).
export default defineConfig({
  test: {
    include: ["test/runtime/**/*.test.ts"],
    environment: "node",
  },
});
