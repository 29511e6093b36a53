/** What the global setup provides to the test configuration. */
declare module "vitest" {
  export interface ProvidedContext {
    sandboxHostUrl: string;
  }
}

export {};
