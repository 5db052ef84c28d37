/**
 * The last step of `npm run bench:quick` (scripts/bench.sh --quick): reads the JSON lines the quick
 * benches printed and prints one line per goal of issue 18 (bench/quick-goals.ts), then a summary
 * line counting the goals met.
 *
 * Run: npx tsx bench/quick.ts <file of bench JSON lines> [runtime ...]
 * (the runtimes the benches ran on; default: those the lines name). Exits 0 whether or not the
 * goals are met (they are targets, and the figures are noisy on a shared machine), unless
 * BENCH_QUICK_STRICT=1: then a goal not met, or a figure missing, exits 1.
 */
import { readFileSync } from "node:fs";
import { benchArgs, emit, envString, runBench } from "./harness.ts";
import { evaluateGoals, parseLines } from "./quick-goals.ts";

runBench("quick", async () => {
  const [file, ...runtimes] = benchArgs();
  if (file === undefined) throw new Error("usage: bench/quick.ts <file of bench JSON lines> [runtime ...]");
  const goals = evaluateGoals(parseLines(readFileSync(file, "utf8")), runtimes.length > 0 ? runtimes : undefined);
  for (const goal of goals) emit(goal);
  const met = goals.filter((g) => g.met === true).length;
  const missing = goals.filter((g) => g.met === null).length;
  emit({ bench: "quick", summary: true, goals: goals.length, met, not_met: goals.length - met - missing, missing });
  if (envString("BENCH_QUICK_STRICT") === "1" && met < goals.length) {
    throw new Error(`${goals.length - met} of ${goals.length} goals not met or not measured (BENCH_QUICK_STRICT=1)`);
  }
});
