import type { AgentBuildContext } from "../extension-api/index.ts";
import { errorMessage } from "../core/errors.ts";
import type { DiagnosticSink } from "./diagnostics.ts";
import type { LoadedExtensions } from "./registry.ts";
import type { ExtensionMiddlewareContribution } from "./stack.ts";

/**
 * Asks every middleware contributor for its placements, attributed to its extension. A contributor
 * that throws, or answers with something other than a list, contributes nothing and is reported;
 * the others still contribute. Each item is validated later, at composition.
 */
export function collectMiddlewareContributions(
  loaded: LoadedExtensions,
  ctx: AgentBuildContext,
  onDiagnostic: DiagnosticSink,
): ExtensionMiddlewareContribution[] {
  const contributions: ExtensionMiddlewareContribution[] = [];
  for (const { source, value } of loaded.middlewareContributors) {
    let items: unknown;
    try {
      items = value.contributeMiddlewares(loaded.appStore, ctx);
    } catch (error) {
      onDiagnostic({ level: "error", source, message: `contributeMiddlewares failed and the extension contributes no middleware: ${errorMessage(error)}` });
      continue;
    }
    if (!Array.isArray(items)) {
      onDiagnostic({ level: "error", source, message: "contributeMiddlewares must return a list of placements; the extension contributes no middleware." });
      continue;
    }
    for (const item of items as Array<Record<string, unknown>>) {
      contributions.push({ source, middleware: item?.middleware, placement: item?.placement, scope: item?.scope, order: item?.order });
    }
  }
  return contributions;
}
