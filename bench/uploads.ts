/**
 * Upload memory: the real CLI server of the runtime this runs under (fs storage in a temp folder)
 * takes BENCH_UPLOADS uploads (default 30) of BENCH_UPLOAD_MB MiB (default 20) each, one file per
 * request, each to its own thread. Reports the server's RSS before, right after, and after
 * BENCH_SETTLE_MS (default 3000) idle, the RSS after the first upload (what a runtime keeps once
 * it has taken one big body), the upload throughput, and whether every file reads back with the
 * same sha256. Goal: RSS back within 50 MB of where it started. Linux only (RSS from
 * /proc/<pid>/status).
 */
import { readFile } from "node:fs/promises";
import { cliWorkspace } from "../test/portable/gateway/cli-server.ts";
import { emit, envNumber, progressLog, runBench, runtimeInfo } from "./harness.ts";

const BENCH = "uploads";
const log = progressLog(BENCH);
const MIB = 1024 * 1024;
const round1 = (n: number) => Math.round(n * 10) / 10;

async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kib = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`No VmRSS in /proc/${pid}/status.`);
  return Number(kib) * 1024;
}

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function randomBytes(size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  for (let offset = 0; offset < size; offset += 65_536) crypto.getRandomValues(bytes.subarray(offset, offset + 65_536));
  return bytes;
}

runBench(BENCH, async () => {
  const { runtime, version } = runtimeInfo();
  const uploads = envNumber("BENCH_UPLOADS", 30);
  const sizeMib = envNumber("BENCH_UPLOAD_MB", 20);
  const settleMs = envNumber("BENCH_SETTLE_MS", 3000);
  // Max 50 MiB per file by default; a bigger file gets a bigger limit so the bench measures memory, not refusals.
  const workspace = await cliWorkspace({ gateway: { uploads: { max_file_bytes: Math.max(50, sizeMib + 1) * MIB, max_total_bytes: Math.max(100, sizeMib + 1) * MIB } } });
  try {
    const server = await workspace.start();
    const pid = server.child.pid!;
    const post = (threadId: string, name: string, bytes: Uint8Array<ArrayBuffer>) => {
      const form = new FormData();
      form.append("files", new File([bytes], name));
      return fetch(`${server.url}/api/threads/${threadId}/uploads`, { method: "POST", body: form });
    };
    // Warm-up: the upload path's code loaded and compiled before the first reading.
    const warm = await post("bench-warmup", "warm.bin", randomBytes(MIB));
    if (warm.status !== 200) throw new Error(`warm-up upload answered ${warm.status}: ${await warm.text()}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = await rssBytes(pid);
    log(`server pid ${pid} RSS ${round1(before / MIB)} MiB before ${uploads} uploads of ${sizeMib} MiB`);

    const digests: string[] = [];
    let peak = before;
    // What the runtime keeps once it has taken one big body (heap and allocator high-water marks)
    // is told apart from what each further upload would add if uploads were retained.
    let afterFirst = before;
    const started = performance.now();
    for (let i = 0; i < uploads; i++) {
      // A fresh file each time, so the client's own memory stays one file.
      const bytes = randomBytes(sizeMib * MIB);
      digests.push(await sha256(bytes));
      const response = await post(`bench-${i}`, `file-${i}.bin`, bytes);
      if (response.status !== 200) throw new Error(`upload ${i} answered ${response.status}: ${await response.text()}`);
      await response.arrayBuffer();
      const rss = await rssBytes(pid);
      peak = Math.max(peak, rss);
      if (i === 0) afterFirst = rss;
    }
    const seconds = (performance.now() - started) / 1000;
    const after = await rssBytes(pid);
    await new Promise((resolve) => setTimeout(resolve, settleMs));
    const settled = await rssBytes(pid);
    log(`RSS ${round1(after / MIB)} MiB right after, ${round1(settled / MIB)} MiB after ${settleMs} ms idle (peak ${round1(peak / MIB)} MiB)`);

    let matching = 0;
    for (let i = 0; i < uploads; i++) {
      const served = await fetch(`${server.url}/api/threads/bench-${i}/artifacts/mnt/user-data/uploads/file-${i}.bin`);
      if (served.status === 200 && (await sha256(new Uint8Array(await served.arrayBuffer()))) === digests[i]) matching++;
      else log(`file-${i}.bin did not read back the same (status ${served.status})`);
    }
    const afterReads = await rssBytes(pid);
    const growth = settled - before;
    emit({
      bench: BENCH,
      summary: true,
      runtime,
      runtime_version: version,
      storage: "fs",
      uploads,
      file_mib: sizeMib,
      rss_before_mib: round1(before / MIB),
      rss_after_mib: round1(after / MIB),
      rss_settled_mib: round1(settled / MIB),
      rss_peak_mib: round1(peak / MIB),
      rss_growth_mib: round1(growth / MIB),
      rss_after_first_upload_mib: round1(afterFirst / MIB),
      rss_growth_after_first_upload_mib: round1((settled - afterFirst) / MIB),
      rss_after_reads_mib: round1(afterReads / MIB),
      goal_growth_mib: 50,
      within_goal: growth <= 50 * MIB,
      upload_mib_per_s: round1((uploads * sizeMib) / seconds),
      sha256_matching: matching,
      sha256_checked: uploads,
    });
    if (matching !== uploads) throw new Error(`${uploads - matching} of ${uploads} files did not read back with the same sha256.`);
  } finally {
    await workspace.dispose();
  }
});
