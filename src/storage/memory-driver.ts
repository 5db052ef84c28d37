import { defineDriver, type Driver } from "unstorage";

/*
 * unstorage's memory driver answers getKeys(base) with every key it holds, and unstorage then
 * filters them, so each prefix lookup costs the whole store: a checkpoint read on one thread went
 * from 95 to 360 ms per run as 300 threads accumulated. Here keys are also indexed by their
 * `:`-separated segments, so a lookup walks only the subtree under its base.
 */

interface IndexNode {
  readonly children: Map<string, IndexNode>;
  /** The full key that ends at this node, if one does. */
  key: string | undefined;
}

const newNode = (): IndexNode => ({ children: new Map(), key: undefined });
const segmentsOf = (key: string): string[] => key.split(":").filter((part) => part !== "");

export function scopedMemoryDriver(): Driver {
  const data = new Map<string, unknown>();
  const root = newNode();

  const index = (key: string) => {
    let node = root;
    for (const segment of segmentsOf(key)) {
      let child = node.children.get(segment);
      if (!child) {
        child = newNode();
        node.children.set(segment, child);
      }
      node = child;
    }
    node.key = key;
  };

  const unindex = (key: string) => {
    const path: Array<[IndexNode, string]> = [];
    let node: IndexNode | undefined = root;
    for (const segment of segmentsOf(key)) {
      const child: IndexNode | undefined = node.children.get(segment);
      if (!child) return;
      path.push([node, segment]);
      node = child;
    }
    node.key = undefined;
    // Prune the branch back to the first node something else still hangs on.
    for (let i = path.length - 1; i >= 0; i--) {
      const [parent, segment] = path[i]!;
      const child = parent.children.get(segment)!;
      if (child.key !== undefined || child.children.size > 0) break;
      parent.children.delete(segment);
    }
  };

  const set = (key: string, value: unknown) => {
    if (!data.has(key)) index(key);
    data.set(key, value);
  };

  const keysUnder = (base: string | undefined): string[] => {
    let node: IndexNode | undefined = root;
    for (const segment of segmentsOf(base ?? "")) {
      node = node.children.get(segment);
      if (!node) return [];
    }
    const out: string[] = [];
    const stack: IndexNode[] = [node];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (next.key !== undefined) out.push(next.key);
      for (const child of next.children.values()) stack.push(child);
    }
    return out;
  };

  const clear = () => {
    data.clear();
    root.children.clear();
    root.key = undefined;
  };

  return defineDriver(() => ({
    name: "memory",
    getInstance: () => data,
    hasItem: (key: string) => data.has(key),
    getItem: (key: string) => data.get(key) ?? null,
    getItemRaw: (key: string) => data.get(key) ?? null,
    setItem: (key: string, value: string) => set(key, value),
    setItemRaw: (key: string, value: unknown) => set(key, value),
    removeItem: (key: string) => {
      if (data.delete(key)) unindex(key);
    },
    getKeys: (base: string) => keysUnder(base),
    clear: (base: string) => {
      if (segmentsOf(base ?? "").length === 0) return clear();
      for (const key of keysUnder(base)) {
        data.delete(key);
        unindex(key);
      }
    },
    dispose: () => clear(),
  }))(undefined);
}
