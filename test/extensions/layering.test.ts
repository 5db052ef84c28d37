// Spec (extension-system.md): "Nothing under extensions/ may import agents.middlewares at module
// scope: the middleware layer calls into this one, so a module-scope reference points the dependency
// backwards and closes a cycle as soon as any middleware imports something under extensions/ at
// module level." ARCHITECTURE.md rule 2: `extensions/` "never imports `agents/` or `middlewares/`".
// Guarded on its own (like test/extension-api/dependency-free.test.ts), independently of the floor
// table in test/house/import-graph.test.ts: every file reachable from src/extensions through any
// import (static, re-export, type-only, dynamic) stays outside src/middlewares and src/agents.
import { describe, expect, it } from "vitest";
import { type Edge, folderOf, importEdges } from "../support/import-edges.ts";

const FORBIDDEN = ["middlewares", "agents"];

/** Each forbidden file reachable from src/extensions, with the import chain that reaches it. */
function forbiddenReaches(files: readonly string[], edges: readonly Edge[]): string[] {
  const next = new Map<string, string[]>();
  for (const edge of edges) next.set(edge.from, [...(next.get(edge.from) ?? []), edge.to]);
  const via = new Map<string, string | null>();
  const queue = files.filter((file) => folderOf(file) === "extensions");
  for (const file of queue) via.set(file, null);
  const found: string[] = [];
  while (queue.length > 0) {
    const node = queue.shift()!;
    if (FORBIDDEN.includes(folderOf(node))) {
      const chain = [node];
      for (let at = via.get(node); at != null; at = via.get(at)) chain.unshift(at);
      found.push(chain.join(" -> "));
      continue;
    }
    for (const to of next.get(node) ?? []) {
      if (via.has(to)) continue;
      via.set(to, node);
      queue.push(to);
    }
  }
  return found;
}

describe("src/extensions never imports src/middlewares", () => {
  const { files, edges } = importEdges();

  it("reads the extension layer", () => {
    expect(files.filter((file) => folderOf(file) === "extensions").length).toBeGreaterThan(10);
  });

  it('"Nothing under extensions/ may import agents.middlewares": no src/middlewares or src/agents file is reachable from src/extensions', () => {
    expect(forbiddenReaches(files, edges)).toEqual([]);
  });

  it("the guard catches a direct and a transitive reach", () => {
    const sample = ["extensions/a.ts", "extensions/b.ts", "tools/t.ts", "middlewares/m.ts", "agents/g.ts", "core/c.ts"];
    const bad: Edge[] = [
      { from: "extensions/a.ts", to: "core/c.ts", specifier: "../core/c.ts" },
      { from: "extensions/a.ts", to: "middlewares/m.ts", specifier: "../middlewares/m.ts" },
      { from: "extensions/b.ts", to: "tools/t.ts", specifier: "../tools/t.ts" },
      { from: "tools/t.ts", to: "agents/g.ts", specifier: "../agents/g.ts" },
    ];
    expect(forbiddenReaches(sample, bad)).toEqual(["extensions/a.ts -> middlewares/m.ts", "extensions/b.ts -> tools/t.ts -> agents/g.ts"]);
  });
});
