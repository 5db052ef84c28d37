// The pool and setup files both vitest configs share. Under Deno: worker threads, which keep the
// permissions of `deno run` (Deno's child_process.fork would start each test file with -A), plus
// the shim those threads need (test/deno-threads.ts).
const deno = "Deno" in globalThis;

export const pool = deno ? "threads" : "forks";
export const setupFiles = ["./test/setup.ts", ...(deno ? ["./test/deno-threads.ts"] : [])];
