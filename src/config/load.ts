import * as v from "valibot";
import { parse as parseYaml, YAMLParseError } from "yaml";
import { ConfigError, type ConfigIssue } from "./errors.ts";
import { parseReplayRecording, samePromptRecordings, type ReplayRecording } from "./replay-recording.ts";
import { describeIssue, formatKeyPath } from "./issues.ts";
import { AppConfigSchema, DEMO_MODEL_NAME, describeValue, type AppConfig } from "./schema.ts";

/**
 * The schema a config is validated with: the base sections here, or a larger one that adds the
 * sections of layers above config (each middleware owns its section's schema; the agent layer
 * composes them with {@link mapping} over {@link appConfigEntries}).
 */
export type ConfigSchema<T extends AppConfig> = v.GenericSchema<unknown, T> & { pipe: readonly [unknown, { entries: v.ObjectEntries }] };

/** Parses the text of config.yaml (YAML; JSON is YAML too). An empty file gives every default. */
export function parseConfigText<T extends AppConfig = AppConfig>(text: string, fileName: string, schema?: ConfigSchema<T>): T {
  return validateConfig(readConfigText(text, fileName), fileName, schema);
}

/** The YAML of a config as a plain value, not yet validated (an empty text is `{}`); throws `config_not_yaml`. */
export function readConfigText(text: string, fileName: string): unknown {
  try {
    return parseYaml(text, { uniqueKeys: true, prettyErrors: true }) ?? {};
  } catch (error) {
    throw new ConfigError("config_not_yaml", fileName, [{ path: "", message: describeYamlError(error) }], {
      cause: error,
    });
  }
}

/** Validates an already-parsed config value; throws ConfigError naming the first bad key path. */
export function validateConfig<T extends AppConfig = AppConfig>(value: unknown, fileName: string, schema?: ConfigSchema<T>): T {
  const root = (schema ?? AppConfigSchema) as unknown as ConfigSchema<T>;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const sections = Object.keys(root.pipe[1].entries).join(", ");
    throw new ConfigError("config_invalid", fileName, [
      { path: "", message: `expected a mapping of top-level sections (${sections}), got ${describeValue(value)}` },
    ]);
  }
  const result = v.safeParse(root, value);
  if (!result.success) {
    const issues = result.issues.map((issue) => describeIssue(issue, root, fileName));
    throw new ConfigError("config_invalid", fileName, issues);
  }
  const crossIssues = checkCrossReferences(result.output);
  if (crossIssues.length > 0) throw new ConfigError("config_invalid", fileName, crossIssues);
  return result.output;
}

export interface LoadConfigOptions {
  fileName: string;
  /** Reads the file; resolves to undefined when it does not exist. Supplied by the runtime adapter. */
  readText: (fileName: string) => Promise<string | undefined>;
  /** When true (the default), a missing file gives the defaults; when false it is an error. */
  optional?: boolean;
}

export async function loadConfig(options: LoadConfigOptions): Promise<AppConfig> {
  const text = await options.readText(options.fileName);
  if (text === undefined) {
    if (options.optional ?? true) return validateConfig({}, options.fileName);
    throw new ConfigError("config_not_found", options.fileName, [
      { path: "", message: "file not found; create it or point to an existing config file" },
    ]);
  }
  return parseConfigText(text, options.fileName);
}

function describeYamlError(error: unknown): string {
  if (error instanceof YAMLParseError) {
    // The package appends " at line L, column C:" and a source excerpt; keep the one-line reason.
    const reason = (error.message.split(/ at line \d+, column \d+/)[0] ?? error.message).trim();
    const pos = error.linePos?.[0];
    return pos === undefined
      ? `not valid YAML: ${reason}`
      : `not valid YAML (line ${pos.line}, column ${pos.col}): ${reason}`;
  }
  const reason = error instanceof Error ? error.message : String(error);
  return `not valid YAML: ${reason.split("\n")[0]}`;
}

/** Rules that span several keys: unique model names, required model id, default_model known. */
function checkCrossReferences(config: AppConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const firstIndexByName = new Map<string, number>();
  config.models.forEach((model, index) => {
    const at = (key: string) => formatKeyPath([{ key: "models" }, { key: index }, { key }]);
    if (model.name === DEMO_MODEL_NAME && model.use !== "demo") {
      issues.push({
        path: at("name"),
        message: `"${DEMO_MODEL_NAME}" is reserved for the built-in demo model; choose another name`,
      });
    }
    const earlier = firstIndexByName.get(model.name);
    if (earlier === undefined) firstIndexByName.set(model.name, index);
    else {
      issues.push({
        path: at("name"),
        message: `duplicate model name "${model.name}" (already used by models[${earlier}]); model names must be unique`,
      });
    }
    if (
      model.use === "replay" &&
      model.fixture === undefined &&
      model.recording === undefined &&
      model.fixtures === undefined &&
      model.recordings === undefined
    ) {
      issues.push({
        path: at("fixture"),
        message: `required when use is "replay"; set it to the recorded session to play (a fixture file, relative to this config file), or fixtures: to a list of them`,
      });
    }
    for (const key of ["fixture", "recording", "fixtures", "recordings"] as const) {
      if (model.use !== "replay" && model[key] !== undefined) {
        issues.push({ path: at(key), message: `only read when use is "replay"; remove it, or set use: replay` });
      }
    }
    for (const [one, several] of [["fixture", "fixtures"], ["recording", "recordings"]] as const) {
      if (model.use === "replay" && model[one] !== undefined && model[several] !== undefined) {
        issues.push({ path: at(several), message: `give either ${one} (one recording) or ${several} (a list), not both; put the ${one} in the ${several} list` });
      }
    }
    const conflict = model.fixtures === undefined && model.recordings !== undefined ? samePromptRecordings(model.recordings) : undefined;
    if (conflict !== undefined) {
      issues.push({
        path: formatKeyPath([{ key: "models" }, { key: index }, { key: "recordings" }, { key: conflict[1] }, { key: "prompt" }]),
        message: `the same prompt as recordings[${conflict[0]}]; each recording of a replay model must answer its own prompt`,
      });
    }
    if (model.use === "openai-compatible" && model.model === undefined) {
      issues.push({
        path: at("model"),
        message: `required when use is "openai-compatible"; set it to the provider's model id (e.g. gpt-4o-mini)`,
      });
    }
  });
  if (config.default_model !== undefined && !availableModelNames(config).includes(config.default_model)) {
    issues.push({
      path: "default_model",
      message: `"${config.default_model}" is not a configured model; expected one of: ${availableModelNames(config)
        .map((name) => JSON.stringify(name))
        .join(", ")}`,
    });
  }
  return issues;
}

/** Configured model names, then the built-in demo model when it is not listed. */
export function availableModelNames(config: Pick<AppConfig, "models">): string[] {
  const names = config.models.map((model) => model.name);
  if (!names.includes(DEMO_MODEL_NAME)) names.push(DEMO_MODEL_NAME);
  return names;
}

export interface ReplayFixtureSource {
  /** The file's text, or undefined when it does not exist (the runtime adapter's file read). */
  readText(path: string): Promise<string | undefined>;
  /** The config file's folder: a relative `fixture` path resolves against it. */
  readonly baseDir: string;
}

/** `fixture` as a path from where the process runs: absolute paths as they are, others under the config's folder. */
export function resolveFixturePath(fixture: string, baseDir: string): string {
  if (/^([A-Za-z]:)?[\\/]/.test(fixture) || baseDir === "" || baseDir === ".") return fixture;
  return `${baseDir.replace(/[\\/]+$/, "")}/${fixture}`;
}

/**
 * Reads the fixture of every `use: replay` model that has no recording yet and returns the config
 * with each recording filled in, so a bad or missing fixture stops the process at start. A config
 * without replay models comes back as it is.
 */
export async function loadReplayRecordings<T extends AppConfig>(config: T, source: ReplayFixtureSource, configFileName: string): Promise<T> {
  const pending = (model: AppConfig["models"][number]): boolean =>
    model.use === "replay" && ((model.recording === undefined && model.fixture !== undefined) || (model.recordings === undefined && model.fixtures !== undefined));
  if (!config.models.some(pending)) return config;
  const models = await Promise.all(
    config.models.map(async (model, index) => {
      if (!pending(model)) return model;
      const read = async (fixture: string, key: Array<string | number>): Promise<ReplayRecording> => {
        const path = resolveFixturePath(fixture, source.baseDir);
        const content = await source.readText(path);
        if (content === undefined) {
          const issue: ConfigIssue = {
            path: formatKeyPath([{ key: "models" }, { key: index }, ...key.map((k) => ({ key: k }))]),
            message: `the replay fixture ${path} does not exist; fixture paths are relative to the config file's folder`,
          };
          throw new ConfigError("config_not_found", configFileName, [issue]);
        }
        return parseReplayRecording(content, path);
      };
      const loaded = { ...model };
      if (model.recording === undefined && model.fixture !== undefined) loaded.recording = await read(model.fixture, ["fixture"]);
      if (model.recordings === undefined && model.fixtures !== undefined) {
        const fixtures = model.fixtures;
        const recordings = await Promise.all(fixtures.map((fixture, at) => read(fixture, ["fixtures", at])));
        const conflict = samePromptRecordings(recordings);
        if (conflict !== undefined) {
          const [a, b] = conflict.map((at) => resolveFixturePath(fixtures[at]!, source.baseDir));
          const issue: ConfigIssue = {
            path: formatKeyPath([{ key: "models" }, { key: index }, { key: "fixtures" }, { key: conflict[1] }]),
            message: `${b} records the same prompt as ${a} ("${recordings[conflict[1]]!.prompt.slice(0, 60)}"); each fixture of a replay model must answer its own prompt`,
          };
          throw new ConfigError("config_invalid", configFileName, [issue]);
        }
        loaded.recordings = recordings;
      }
      return loaded;
    }),
  );
  return { ...config, models };
}
