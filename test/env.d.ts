import type { StandInContainerSandboxDO } from "./worker";

declare global {
  namespace Cloudflare {
    interface Env {
      STANDIN_CONTAINER_SANDBOX: DurableObjectNamespace<StandInContainerSandboxDO>;
      /** The token the test git server accepts (test/node/git-server.ts). */
      TEST_GIT_TOKEN: string;
      /** The fake model server (test/node/fake-llm.ts). */
      FAKE_LLM_URL: string;
    }
  }
}
