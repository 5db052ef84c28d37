// Types for the parts of scripts/build-worker.mjs that tests and benches import.
export declare const WORKER_ENTRY: string;
export declare const DEFAULT_WORKER_OUTDIR: string;
export declare const WORKER_ENTRY_MODULE: string;
/** The text every edge-trim stub's error (and console line) starts with. */
export declare const TRIM_MARKER: string;
/** Builds the Workers modules into `outdir`; the module names (entry first) and esbuild's metafile. */
export declare function buildWorker(outdir?: string): Promise<{ modules: string[]; metafile: unknown }>;
