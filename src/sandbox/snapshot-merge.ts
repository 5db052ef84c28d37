import { posixDirname, type SnapshotEntry, type VirtualSnapshot } from "./memory-fs.ts";

/*
 * Two saves of one thread's files from the same stored base (two workers each holding the thread's
 * sandbox): a three-way merge by path, so neither save drops what the other changed. A path changed
 * by one side takes that side; changed alike by both, that; changed differently by both, the later
 * save keeps its file at the path and the earlier one's is kept beside it, renamed
 * `<name>.conflict` (`.conflict-2`, ...), and is reported. Both are kept rather than the later save
 * failing, since a save runs at release: failing it would lose the run's files with the sandbox.
 * A deletion against a change keeps the change: a file is never lost to a merge.
 */

export interface SnapshotMerge {
  readonly merged: VirtualSnapshot;
  /** Paths both saves changed differently, with where the earlier save's version was kept. */
  readonly conflicts: ReadonlyArray<{ readonly path: string; readonly keptAs: string }>;
}

export const EMPTY_SNAPSHOT: VirtualSnapshot = Object.freeze({ format: "deerflow-edge.virtual-sandbox", version: 1, entries: [] });

const same = (a: SnapshotEntry | undefined, b: SnapshotEntry | undefined): boolean =>
  a === b || (a !== undefined && b !== undefined && JSON.stringify(a) === JSON.stringify(b));

export function mergeSnapshots(base: VirtualSnapshot, ours: VirtualSnapshot, theirs: VirtualSnapshot): SnapshotMerge {
  const byPath = (snapshot: VirtualSnapshot) => new Map(snapshot.entries.map((entry) => [entry.path, entry]));
  const [b, o, t] = [byPath(base), byPath(ours), byPath(theirs)];
  const out = new Map<string, SnapshotEntry>();
  const conflicts: Array<{ path: string; keptAs: string }> = [];
  const kept: SnapshotEntry[] = [];
  for (const path of new Set([...o.keys(), ...t.keys(), ...b.keys()])) {
    const [was, mine, other] = [b.get(path), o.get(path), t.get(path)];
    let chosen: SnapshotEntry | undefined;
    if (same(mine, other) || same(other, was)) chosen = mine;
    else if (same(mine, was)) chosen = other;
    else if (mine === undefined || other === undefined) chosen = mine ?? other;
    else {
      chosen = mine;
      if (other.type === "file") kept.push(other);
    }
    if (chosen !== undefined) out.set(path, chosen);
  }
  for (const other of kept) {
    let keptAs = `${other.path}.conflict`;
    for (let n = 2; out.has(keptAs); n++) keptAs = `${other.path}.conflict-${n}`;
    out.set(keptAs, { ...other, path: keptAs });
    conflicts.push({ path: other.path, keptAs });
  }
  // A file one side added under a folder the other removed keeps its folder.
  for (const path of [...out.keys()]) {
    for (let dir = posixDirname(path); dir !== "/" && dir !== "." && !out.has(dir); dir = posixDirname(dir)) {
      if (b.get(dir)?.type === "directory" || o.get(dir)?.type === "directory" || t.get(dir)?.type === "directory") {
        out.set(dir, { path: dir, type: "directory" });
      }
    }
  }
  // Parents first: a path sorts after every prefix of it.
  const entries = [...out.values()].sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
  return { merged: { format: "deerflow-edge.virtual-sandbox", version: 1, entries }, conflicts };
}
