// Where a worker's entry module is, from the module that starts it. The build rewrites import
// specifiers (.ts to .js) but not the URLs handed to a Worker, so those are chosen here.

/** Whether `base` (an import.meta.url) is a TypeScript source rather than the build's JavaScript. */
export function runsFromSources(base: string): boolean {
  return new URL(base).pathname.endsWith(".ts");
}

/**
 * The module `stem` beside `base`, with the extension the running code has: `.ts` from the
 * sources, `.js` from the build (tsc's dist/, a bundle, a compiled binary).
 */
export function siblingModule(stem: string, base: string): URL {
  return new URL(`./${stem}${runsFromSources(base) ? ".ts" : ".js"}`, base);
}
