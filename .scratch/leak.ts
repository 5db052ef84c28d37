import "../adapters/shared/als.ts";
import { writeHeapSnapshot } from "node:v8";
import { readFileSync } from "node:fs";
import { startOurs } from "../bench/gateway-ours.ts";
import { createThread, streamRun } from "../bench/gateway-sse.ts";

const g = globalThis as any;
const server = await startOurs({ storage: (process.env.STORE as any) ?? "fs", runtime: "node" });
const N = Number(process.env.N ?? 100);
async function burst(tag: string) {
  let next = 0;
  const worker = async () => {
    while (next < N) {
      const i = next++;
      const id = await createThread(server.target);
      const out = await streamRun(server.target, id, { input: { messages: [{ role: "user", content: `Write a note about ${tag} (${i}) and count its words.` }] }, stream_mode: ["values", "messages-tuple"] });
      if ((out as any).error) throw new Error(String((out as any).error));
    }
  };
  await Promise.all(Array.from({ length: 20 }, worker));
}
function counts(file: string): Map<string, [number, number]> {
  const snap = JSON.parse(readFileSync(file, "utf8"));
  const f = snap.snapshot.meta.node_fields as string[];
  const types = snap.snapshot.meta.node_types[0] as string[];
  const nf = f.length, ti = f.indexOf("type"), ni = f.indexOf("name"), si = f.indexOf("self_size");
  const out = new Map<string, [number, number]>();
  const nodes = snap.nodes as number[];
  for (let i = 0; i < nodes.length; i += nf) {
    const key = `${types[nodes[i + ti]]}:${String(snap.strings[nodes[i + ni]]).slice(0, 60)}`;
    const e = out.get(key) ?? [0, 0];
    e[0]++; e[1] += nodes[i + si];
    out.set(key, e);
  }
  return out;
}
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const IDLE = Number(process.env.IDLE ?? 65_000);
await burst("warm"); await wait(IDLE); g.gc(); g.gc();
const a = writeHeapSnapshot("/tmp/h1.heapsnapshot");
console.error("h1", process.memoryUsage().heapUsed);
await burst("b1"); await wait(IDLE); g.gc(); g.gc();
const b = writeHeapSnapshot("/tmp/h2.heapsnapshot");
console.error("h2", process.memoryUsage().heapUsed);
const A = counts(a), B = counts(b);
const diff = [...B].map(([k, [c, s]]) => [k, c - (A.get(k)?.[0] ?? 0), s - (A.get(k)?.[1] ?? 0)] as const).filter((d) => d[1] > 0).sort((x, y) => y[2] - x[2]).slice(0, 40);
for (const d of diff) console.log(d[2], d[1], d[0]);
await server.close();
process.exit(0);
