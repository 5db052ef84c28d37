// Types for the parts of scripts/build-worker.mjs that tests and benches import.
export declare const WORKER_ENTRY: string;
export declare const DEFAULT_WORKER_OUTDIR: string;
export declare const WORKER_ENTRY_MODULE: string;
/** The text every edge-trim stub's error (and console line) starts with. */
export declare const TRIM_MARKER: string;
/** just-bash's commands the Workers build leaves out, each with the reason its stub answers. */
export declare const TRIMMED_COMMANDS: Readonly<Record<string, string>>;
/** The lc namespaces (load/import_map.js keys) the Workers build's checkpoint serializer revives. */
export declare const REVIVABLE_NAMESPACES: readonly string[];
/** Builds the Workers modules (of `entry`, the Worker's by default) into `outdir`, each minified again by oxc; the module names (entry first) and esbuild's metafile (its bytes before oxc). */
export declare function buildWorker(outdir?: string, entry?: string): Promise<{ modules: string[]; metafile: unknown }>;
/** just-bash's browser bundle with its lazy inits marked pure and TRIMMED_COMMANDS stubbed; throws if `source` no longer has that shape. */
export declare function trimmedJustBash(source: string, path: string): string;
/** @langchain/core's load/import_map.js at `path` cut to REVIVABLE_NAMESPACES; throws if the file no longer has that shape. */
export declare function trimmedImportMap(path: string): Promise<string>;
/** The MCP SDK's client/auth.js at `path` cut to its 401 helpers and a throwing auth(); throws if the file no longer has them. */
export declare function trimmedMcpAuth(path: string): Promise<string>;
/** The providers whose @langchain/core content-block translator the Workers build keeps. */
export declare const KEPT_TRANSLATORS: readonly string[];
/** @langchain/core's messages/block_translators/index.js at `path` cut to KEPT_TRANSLATORS; throws if the file no longer has that shape. */
export declare function trimmedBlockTranslators(path: string): Promise<string>;
