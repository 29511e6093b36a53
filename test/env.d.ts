import type { StandInContainerSandboxDO } from "./worker";

declare global {
  namespace Cloudflare {
    interface Env {
      STANDIN_CONTAINER_SANDBOX: DurableObjectNamespace<StandInContainerSandboxDO>;
    }
  }
}
