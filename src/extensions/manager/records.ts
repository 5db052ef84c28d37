import { appendEdit, updateEdit, type PluginRecord, type PluginsConfig, type PluginsEdit } from "./config-file.ts";
import { ExtensionManagerError } from "./errors.ts";

// Finding and planning the plugin records in config.yaml: which record an identifier names, and
// the edit that records a newly installed package.

export function recordName(record: PluginRecord): string {
  return typeof record["name"] === "string" && record["name"] !== "" ? record["name"] : String(record["use"]);
}

/** The one record an identifier (name, package or use) names; `displayConfig` is the config as the user named it. */
export function resolveIndex(records: readonly PluginRecord[], identifier: string, displayConfig: string): number {
  const matches = records.flatMap((record, index) =>
    record["name"] === identifier || record["package"] === identifier || record["use"] === identifier ? [index] : [],
  );
  if (matches.length === 1) return matches[0]!;
  if (matches.length === 0) {
    throw new ExtensionManagerError(
      "extension_not_found",
      `no configured extension is named "${identifier}" (by name, package or use) in ${displayConfig}; run "deerflow-edge extension list" to see them`,
    );
  }
  const names = matches.map((index) => `plugins[${index}] ${recordName(records[index]!)}`).join(", ");
  throw new ExtensionManagerError(
    "extension_not_found",
    `"${identifier}" matches ${matches.length} configured extensions (${names}); name exactly one, by its name or its use value`,
  );
}

/** A new record, or the adoption of a hand-written one with the same `use`; refuses identity clashes. */
export function planRecord(
  config: PluginsConfig,
  candidate: { name: string; package: string; use: string },
  required: boolean,
  displayConfig: string,
): { edit: PluginsEdit; adopted: boolean; required: boolean } {
  const records = config.records;
  const sameUse = records.flatMap((record, index) => (record["use"] === candidate.use ? [index] : []));
  const clashes = records.flatMap((record, index) =>
    !sameUse.includes(index) && (record["name"] === candidate.name || record["package"] === candidate.package) ? [index] : [],
  );
  if (sameUse.length > 1 || clashes.length > 0) {
    const where = [...sameUse.slice(sameUse.length > 1 ? 0 : 1), ...clashes].map((index) => `plugins[${index}] ${recordName(records[index]!)}`).join(", ");
    throw new ExtensionManagerError(
      "extension_conflict",
      `${displayConfig} already has a plugin record with the name "${candidate.name}", the package ${candidate.package} or its entry (${where}); remove or rename that record first`,
    );
  }
  if (sameUse.length === 1) {
    const index = sameUse[0]!;
    const existing = records[index]!;
    if ((existing["name"] !== undefined && existing["name"] !== candidate.name) || (existing["package"] !== undefined && existing["package"] !== candidate.package)) {
      throw new ExtensionManagerError(
        "extension_conflict",
        `plugins[${index}] in ${displayConfig} loads the same entry under another name or package; fix or remove that record first`,
      );
    }
    const fields: PluginRecord = {};
    if (existing["name"] !== candidate.name) fields["name"] = candidate.name;
    if (existing["package"] !== candidate.package) fields["package"] = candidate.package;
    if (existing["enabled"] !== true) fields["enabled"] = true;
    if (existing["required"] === undefined) fields["required"] = required;
    if (existing["config"] === undefined) fields["config"] = {};
    const keptRequired = existing["required"] === undefined ? required : existing["required"] === true;
    return { edit: updateEdit(index, fields), adopted: true, required: keptRequired };
  }
  return {
    edit: appendEdit({ name: candidate.name, package: candidate.package, use: candidate.use, enabled: true, required, config: {} }),
    adopted: false,
    required,
  };
}
