// The rule (ARCHITECTURE.md, rule 2): dependencies point one way. Every folder under src/ sits on a
// floor (FLOORS below, the one place the table is written); an import between files in different
// folders (static, re-export, `import type` or dynamic `import("...")`) must point to a folder on a
// strictly lower floor. Inside one folder any import is fine, but no file may reach itself again
// through its imports: the graph of src/ files (type-only imports included) has no cycle at all.
// A folder the table does not list fails too: a new folder must be placed on a floor first.
import { describe, expect, it } from "vitest";
import { type Edge, folderOf, importEdges } from "../support/import-edges.ts";

/**
 * Floor of each top-level folder of src/ (bottom to top); "index.ts" is the library entry. Folders
 * on the same floor may not import each other. core/ sits just below ports/ (1 < 1.5): the ports'
 * errors extend core's DeerflowError, and core declares the few port types it implements itself.
 */
export const FLOORS: Readonly<Record<string, number>> = {
  "extension-api": 0,
  core: 1,
  ports: 1.5,
  config: 2,
  state: 2,
  storage: 2,
  engine: 3,
  models: 3,
  sandbox: 4,
  skills: 4,
  mcp: 4,
  authz: 4,
  extensions: 4,
  tools: 5,
  middlewares: 6,
  agents: 7,
  runtime: 8,
  gateway: 9,
  cli: 10,
  "index.ts": 11,
};

/** Imports that do not point to a strictly lower floor, and files in folders with no floor. */
export function floorViolations(files: readonly string[], edges: readonly Edge[]): string[] {
  const problems: string[] = [];
  const unplaced = new Set(files.map(folderOf).filter((folder) => FLOORS[folder] === undefined));
  for (const folder of unplaced) problems.push(`src/${folder} is on no floor: add it to FLOORS in test/house/import-graph.test.ts`);
  for (const edge of edges) {
    const from = folderOf(edge.from);
    const to = folderOf(edge.to);
    if (from === to) continue;
    const fromFloor = FLOORS[from];
    const toFloor = FLOORS[to];
    if (fromFloor === undefined || toFloor === undefined) continue;
    if (toFloor >= fromFloor) {
      problems.push(`src/${edge.from} imports "${edge.specifier}" (src/${edge.to}): ${from} (floor ${fromFloor}) may not import ${to} (floor ${toFloor})`);
    }
  }
  return problems;
}

/** Every cycle's strongly connected component (Tarjan), each printed as one closed path through it. */
export function cycles(files: readonly string[], edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>(files.map((file) => [file, []]));
  for (const edge of edges) next.get(edge.from)?.push(edge.to);
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const to of next.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      const selfLoop = (next.get(node) ?? []).includes(node);
      if (component.length > 1 || selfLoop) found.push(closedPath(component, next));
    }
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return found;
}

/** A path inside one component from its first member back to itself (breadth-first, shortest). */
function closedPath(component: readonly string[], next: ReadonlyMap<string, readonly string[]>): string[] {
  const members = new Set(component);
  const start = [...component].sort()[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const to of next.get(node) ?? []) {
      if (!members.has(to)) continue;
      if (to === start) {
        const path = [start];
        for (let at: string | undefined = node; at !== undefined && at !== start; at = previous.get(at)) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!previous.has(to)) {
        previous.set(to, node);
        queue.push(to);
      }
    }
  }
  return [start, start];
}

describe("src/ import graph", () => {
  const { files, edges } = importEdges();

  it("reads the whole tree", () => {
    expect(files.length).toBeGreaterThan(100);
    expect(edges.length).toBeGreaterThan(files.length);
  });

  it("every import points to a strictly lower floor, and every folder has a floor", () => {
    expect(floorViolations(files, edges)).toEqual([]);
  });

  it("no cycle between files, type-only imports included", () => {
    expect(cycles(files, edges).map((cycle) => cycle.join(" -> "))).toEqual([]);
  });

  it("the checks catch what they guard", () => {
    const sample = ["tools/a.ts", "middlewares/b.ts", "brand-new/c.ts", "engine/d.ts", "engine/e.ts"];
    const bad: Edge[] = [
      { from: "tools/a.ts", to: "middlewares/b.ts", specifier: "../middlewares/b.ts" },
      { from: "engine/d.ts", to: "engine/e.ts", specifier: "./e.ts" },
      { from: "engine/e.ts", to: "engine/d.ts", specifier: "./d.ts" },
    ];
    const problems = floorViolations(sample, bad);
    expect(problems).toContain("src/brand-new is on no floor: add it to FLOORS in test/house/import-graph.test.ts");
    expect(problems.some((problem) => problem.startsWith("src/tools/a.ts imports \"../middlewares/b.ts\""))).toBe(true);
    expect(cycles(sample, bad)).toEqual([["engine/d.ts", "engine/e.ts", "engine/d.ts"]]);
  });
});
