/**
 * Knows which methods each route path answers, so that a known path asked with the wrong method
 * gets a 405 with `Allow` instead of a 404.
 */
export class RouteTable {
  private readonly entries: { pattern: RegExp; methods: Set<string> }[] = [];

  constructor(routes: readonly { method: string; path: string }[]) {
    const byPath = new Map<string, Set<string>>();
    for (const { method, path } of routes) {
      if (method === "ALL" || path.endsWith("*")) continue;
      const methods = byPath.get(path) ?? new Set<string>();
      methods.add(method);
      if (method === "GET") methods.add("HEAD");
      byPath.set(path, methods);
    }
    for (const [path, methods] of byPath) {
      const source = path
        .split("/")
        .map((segment) => (segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/");
      this.entries.push({ pattern: new RegExp(`^${source}/?$`), methods });
    }
  }

  /** The methods this path answers, or null when no route has this path. */
  allowed(path: string): string[] | null {
    const methods = new Set<string>();
    for (const entry of this.entries) if (entry.pattern.test(path)) for (const method of entry.methods) methods.add(method);
    return methods.size === 0 ? null : [...methods].sort();
  }
}
