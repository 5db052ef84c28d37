import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { ConfigError } from "../config/errors.ts";
import { describeIssue } from "../config/issues.ts";

/*
 * The `plugins:` list of config.yaml. Startup-only and operator-owned: loading a plugin runs its
 * code with the host's privileges, so it never lives in extensions_config.json, which the gateway
 * API can write. Unknown keys fail — a misspelt `requird: true` silently meaning "optional" would
 * turn a fail-closed guard into a fail-open one.
 */

/** `module:Export`, split at the last colon so `C:\x.ts:install` and `npm:pkg:install` keep their module part. */
export const PLUGIN_USE_PATTERN = /^.+:[A-Za-z_$][\w$]*$/;

export const PluginSpecSchema = v.strictObject({
  /** Operator-facing name (the extension manager records it); diagnostics fall back to `use`. */
  name: v.optional(v.string()),
  use: v.pipe(
    v.string(),
    v.regex(PLUGIN_USE_PATTERN, 'expected "module:Export", e.g. "./extensions/audit.ts:install" or "@acme/deerflow-audit:install"'),
  ),
  /** When false the plugin is skipped without importing it, even if required. */
  enabled: v.optional(v.boolean(), true),
  /** When true a load failure aborts startup instead of being skipped with a diagnostic. */
  required: v.optional(v.boolean(), false),
  /** The installed package the manager recorded; informational for the loader. */
  package: v.optional(v.string()),
  /** Extension-private settings, handed to install() as a shallow copy. */
  config: v.optional(
    v.pipe(
      // valibot's record accepts a list too; a list here is always a mistake (a YAML "- key: value").
      v.custom<Record<string, unknown>>((value) => typeof value === "object" && value !== null && !Array.isArray(value), "expected a mapping"),
      v.record(v.string(), v.unknown()),
    ),
    () => ({}),
  ),
});

export interface PluginSpec {
  name?: string;
  use: string;
  enabled: boolean;
  required: boolean;
  package?: string;
  config: Record<string, unknown>;
}
type _PluginSpecMatches = Assert<SameType<PluginSpec, v.InferOutput<typeof PluginSpecSchema>>>;
export interface PluginSpecInput {
  name?: string;
  use: string;
  enabled?: boolean;
  required?: boolean;
  package?: string;
  config?: Record<string, unknown>;
}
type _PluginSpecInputMatches = Assert<SameType<PluginSpecInput, v.InferInput<typeof PluginSpecSchema>>>;

export const PluginsSchema = v.optional(v.array(PluginSpecSchema), () => []);

/** The top-level section, for composing into the app config schema next to the other sections. */
export const pluginsConfigEntries = { plugins: PluginsSchema };

const PluginsRoot = v.object(pluginsConfigEntries);

/**
 * Validates the value of `plugins:` (undefined means none). Throws ConfigError (`config_invalid`)
 * naming the key path, e.g. `config.yaml: plugins[1].requird: unknown key; expected one of: ...`.
 * A bad plugins block aborts startup: it is a config error, not an extension failure.
 */
export function parsePlugins(value: unknown, fileName = "config.yaml"): PluginSpec[] {
  const result = v.safeParse(PluginsRoot, { plugins: value });
  if (!result.success) {
    const root = PluginsRoot as unknown as v.GenericSchema;
    throw new ConfigError("config_invalid", fileName, result.issues.map((issue) => describeIssue(issue, root, fileName)));
  }
  return result.output.plugins;
}
