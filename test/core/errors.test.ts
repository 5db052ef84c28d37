/*
 * One error root: every error the library throws extends DeerflowError and carries a stable
 * `code`; the library entry exports the error classes that are thrown (and none that nothing
 * throws); no class in src/ extends a built-in error except the root itself.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as lib from "../../src/index.ts";
import { DeerflowError } from "../../src/core/errors.ts";

const srcRoot = fileURLToPath(new URL("../../src/", import.meta.url));
/** The runtime adapters ship in the package too: they raise some of the ports' errors. */
const adaptersRoot = fileURLToPath(new URL("../../adapters/", import.meta.url));

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

const files = sourceFiles(srcRoot).map((path) => ({ path: relative(srcRoot, path).split("\\").join("/"), text: readFileSync(path, "utf8") }));

/** Where DeerflowError itself is declared: the one class allowed to extend Error. */
const ROOT_FILE = files.find((file) => /\bexport class DeerflowError extends Error\b/.test(file.text))?.path;

interface DeclaredClass {
  readonly name: string;
  readonly parent: string;
  readonly exported: boolean;
  readonly file: string;
}

const declared: DeclaredClass[] = files.flatMap((file) =>
  [...file.text.matchAll(/^(export )?(?:abstract )?class (\w+) extends ([\w.]+)/gm)].map((match) => ({
    name: match[2]!,
    parent: match[3]!,
    exported: match[1] !== undefined,
    file: file.path,
  })),
);

/** Classes whose ancestry (as written in src/) reaches DeerflowError. */
function deerflowErrorClasses(): DeclaredClass[] {
  const rooted = new Set(["DeerflowError"]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const entry of declared) {
      if (!rooted.has(entry.name) && rooted.has(entry.parent)) {
        rooted.add(entry.name);
        grew = true;
      }
    }
  }
  return declared.filter((entry) => rooted.has(entry.name) && entry.name !== "DeerflowError");
}

const raisingTexts = [...files.map((file) => file.text), ...sourceFiles(adaptersRoot).map((path) => readFileSync(path, "utf8"))];
const thrown = new Set(raisingTexts.flatMap((text) => [...text.matchAll(/\bnew (\w+)\(/g)].map((match) => match[1]!)));

/** A class is raised if something in src/ or adapters/ constructs it, or it is the base of a class that is. */
function isRaised(name: string): boolean {
  if (thrown.has(name)) return true;
  return declared.some((entry) => entry.parent === name && isRaised(entry.name));
}

/**
 * Errors that stay inside the layer that answers them: the gateway turns its own into HTTP
 * responses, the CLI its own into exit codes and messages. Neither is met by a library caller.
 */
const ANSWERED_INSIDE = /^(gateway|cli)\//;

type ErrorClass = new (...args: never[]) => Error;

const exportedErrorClasses: [string, ErrorClass][] = Object.entries(lib as Record<string, unknown>).flatMap(([name, value]) =>
  typeof value === "function" && value.prototype instanceof Error ? [[name, value as ErrorClass]] : [],
);

/** One instance of every error class the library entry exports, built as the library builds it. */
const SAMPLES: Readonly<Record<string, () => Error>> = {
  AuthorizationProviderError: () => new lib.AuthorizationProviderError("the provider answered 42"),
  CanonicalJsonError: () => new lib.CanonicalJsonError("cycle", "$.a", "a cycle at $.a"),
  CheckpointerError: () => new lib.CheckpointerError("corrupt_record", "a record is corrupt"),
  CustomAgentStoreError: () => new lib.CustomAgentStoreError("deployment:agents:writer"),
  DeploymentFilesError: () => new lib.DeploymentFilesError("deployment_files_write_failed", "could not write custom/x"),
  ClientInputError: () => new lib.ClientInputError("invalid_client_options", "options: bad"),
  ConfigError: () => new lib.ConfigError("config_invalid", "config.yaml", [{ path: "models", message: "expected a list" }]),
  ExtensionApiError: () => new lib.ExtensionApiError("invalid_text", "not a string"),
  ExtensionIsolationError: () => new lib.ExtensionIsolationError("invalid_diagnostic_sink", "isolateMiddleware needs an onDiagnostic"),
  ExtensionLoadError: () => new lib.ExtensionLoadError("audit", "./audit.ts:install", "its module could not be loaded", []),
  ExtensionManagerError: () => new lib.ExtensionManagerError("extension_not_found", "no extension named x"),
  ExtensionMiddlewareError: () => new lib.ExtensionMiddlewareError("./x.ts:X", "module_not_found", "nothing at ./x.ts"),
  ExtensionOrderingError: () => new lib.ExtensionOrderingError("a must run before b", ["a"], []),
  ExtensionPermissionError: () => new lib.ExtensionPermissionError("admins only"),
  ExtensionRegistrationError: () => new lib.ExtensionRegistrationError("extension_registration_closed", "registration is closed"),
  InvalidAgentError: () => new lib.InvalidAgentError("the agent factory returned a plain object"),
  ManagerLockBusyError: () => new lib.ManagerLockBusyError("/srv/extensions/.lock", "pid 42"),
  MemoryStoreError: () => new lib.MemoryStoreError("memory_record_malformed", "the record is not JSON"),
  ModelError: () => new lib.ModelError("the provider is unreachable", { code: "provider_unreachable" }),
  ModelNotAuthorizedError: () => new lib.ModelNotAuthorizedError(false),
  ModuleLoaderError: () => new lib.ModuleLoaderError("module_not_found", "nothing at ./x.ts"),
  ProvenanceError: () => new lib.ProvenanceError("bad stamp"),
  RunOperationError: () => new lib.RunOperationError("run_not_found", "Run r not found"),
  RunLeaseLostError: () => new lib.RunLeaseLostError("Run r lost its lease: the database is unreachable"),
  SandboxAuthorizationError: () => new lib.SandboxAuthorizationError({ userId: "u1", threadId: "t1" }),
  SandboxError: () => new lib.SandboxError("not_found", "no such file"),
  SkillRegistryError: () => new lib.SkillRegistryError("invalid_skill_path", "no skill at x"),
  StateConflictError: () => new lib.StateConflictError("sb-1", "sb-2"),
  StateUpdateError: () => new lib.StateUpdateError("unknown_channel", "no channel x"),
  StorageUnavailableError: () => new lib.StorageUnavailableError("PostgreSQL at 127.0.0.1:5432 (database deerflow) cannot be reached"),
  SummarizationError: () => new lib.SummarizationError("summarization_model_missing", "no model"),
  ThreadDataError: () => new lib.ThreadDataError("thread_id_required", "no thread id"),
  ThreadStateError: () => new lib.ThreadStateError("checkpoint_not_found", "no checkpoint c"),
  ThreadStoreError: () => new lib.ThreadStoreError("invalid_thread_id", "bad id"),
  VersionedConflictError: () => new lib.VersionedConflictError("threads:t1"),
};

/** Exported from their modules for their own family only, and caught where they are raised. */
const CAUGHT_WHERE_RAISED: Readonly<Record<string, string>> = {
  ArgumentError: "the sandbox tools answer a bad argument as an error ToolMessage",
  BatchStoreError: "the batch task tool answers it as a refusal",
  ShlexError: "the sandbox-audit classifier falls back to the raw command text",
  CsvError: "the table detector treats text it cannot read as CSV as not a table",
  StreamReadError: "the OpenAI-compatible model answers it as a provider_bad_response ModelError",
};

describe("one error root", () => {
  it("no class in src/ extends a built-in error except DeerflowError itself", () => {
    expect(ROOT_FILE).toBeDefined();
    const builtIn = /\bextends\s+(?:globalThis\.)?(?:Error|TypeError|RangeError|SyntaxError|ReferenceError|EvalError|URIError|AggregateError)\b/;
    const offenders = files.flatMap((file) =>
      file.text
        .split("\n")
        .map((line, index) => ({ line, index }))
        .filter(({ line }) => builtIn.test(line) && !(file.path === ROOT_FILE && /class DeerflowError extends Error\b/.test(line)))
        .map(({ line, index }) => `src/${file.path}:${index + 1}: ${line.trim()}`),
    );
    expect(offenders).toEqual([]);
  });

  it("every error class the library entry exports extends DeerflowError and carries a stable code", () => {
    expect(Object.keys(SAMPLES).sort()).toEqual(exportedErrorClasses.map(([name]) => name).filter((name) => name !== "DeerflowError").sort());
    for (const [name, ErrorClass] of exportedErrorClasses) {
      expect(ErrorClass === DeerflowError || ErrorClass.prototype instanceof DeerflowError, `${name} extends DeerflowError`).toBe(true);
      if (ErrorClass === DeerflowError) continue;
      const error = SAMPLES[name]!();
      expect(error, name).toBeInstanceOf(ErrorClass);
      expect(error, name).toBeInstanceOf(DeerflowError);
      expect((error as DeerflowError).code, `${name}.code`).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(error.name, `${name}.name`).toBe(name);
      expect(error.message.length, `${name}.message`).toBeGreaterThan(0);
    }
  });

  it("the library entry exports every public error class that is raised, and none that nothing raises", () => {
    const exported = new Set(exportedErrorClasses.map(([name]) => name));
    const publicRaised = deerflowErrorClasses()
      .filter((entry) => entry.exported && !ANSWERED_INSIDE.test(entry.file) && !(entry.name in CAUGHT_WHERE_RAISED) && isRaised(entry.name))
      .map((entry) => `${entry.name} (src/${entry.file})`);
    const missing = publicRaised.filter((label) => !exported.has(label.split(" ")[0]!));
    expect(missing).toEqual([]);
    const neverRaised = [...exported].filter((name) => name !== "DeerflowError" && !isRaised(name));
    expect(neverRaised).toEqual([]);
    // One class per name: two classes of one name are two things a caller cannot tell apart.
    const names = deerflowErrorClasses().map((entry) => entry.name);
    expect(names.filter((name, index) => names.indexOf(name) !== index)).toEqual([]);
  });
});
