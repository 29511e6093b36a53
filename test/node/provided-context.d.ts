/** What the global setup provides to the test configuration and the tests. */
declare module "vitest" {
  export interface ProvidedContext {
    sandboxHostUrl: string;
    gitServerUrl: string;
    gitToken: string;
    fakeLlmUrl: string;
  }
}

export {};
