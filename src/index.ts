import { createApp } from "./app";

export { AccountDO } from "./durable-objects/account-do";
export { ApiKeyDO } from "./durable-objects/api-key-do";
export { ConversationDO } from "./durable-objects/conversation-do";
export { SandboxDO } from "./durable-objects/sandbox-do";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
