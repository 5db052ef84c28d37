import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError } from "../core/errors.ts";
import { normalizePosixPath } from "../core/path.ts";
import { sha256Hex } from "../extension-api/canonical.ts";
import type { KeyValue } from "../ports/key-value.ts";
import { parseSkillMarkdown, type FrontMatterProblemCode } from "./front-matter.ts";

/*
 * Skills are folders holding a SKILL.md. They reach the harness through the KeyValue port under
 * `skills:<folder...>:SKILL.md` (an adapter mounts a real `skills/` directory there; tests use the
 * memory driver), and the model sees them at `<container_path>/<folder>/SKILL.md`, the path
 * DeerFlow's sandboxes mount them at. Nothing is cached: every load re-reads storage and the
 * enabled state, so disabling a skill revokes it on the very next model call.
 */

export const DEFAULT_SKILLS_CONTAINER_PATH = "/mnt/skills";
export const DEFAULT_SKILLS_STORAGE_PREFIX = "skills";
export const SKILL_FILE_NAME = "SKILL.md";

/** DeerFlow's top-level skill folders. Only `custom` skills are editable by the agent. */
export const SKILL_CATEGORIES = Object.freeze(["public", "custom", "integrations", "legacy"] as const);
export type SkillCategory = (typeof SKILL_CATEGORIES)[number];

/** The `skills` section of config.yaml. */
export const SkillsConfigSchema = v.strictObject({
  /** Host folder an adapter mounts under the `skills` storage prefix; the registry only sees storage. */
  path: v.optional(v.string()),
  /** Where the sandbox shows the skills to the model. */
  container_path: v.optional(
    v.pipe(v.string(), v.startsWith("/", "must be an absolute path such as /mnt/skills")),
    DEFAULT_SKILLS_CONTAINER_PATH,
  ),
  /** "all", or the only skill names that may be enabled. */
  enabled: v.optional(v.union([v.literal("all"), v.array(v.string())]), "all"),
});
export type SkillsConfigInput = Partial<SkillsConfig>;
type _SkillsConfigInputMatches = Assert<SameType<SkillsConfigInput, v.InferInput<typeof SkillsConfigSchema>>>;
export interface SkillsConfig {
  path?: string;
  container_path: string;
  enabled: "all" | string[];
}
type _SkillsConfigMatches = Assert<SameType<SkillsConfig, v.InferOutput<typeof SkillsConfigSchema>>>;

/** The `skills` map of extensions_config.json: per-skill toggles, enabled unless said otherwise. */
export const SkillStatesSchema = v.record(v.string(), v.strictObject({ enabled: v.optional(v.boolean(), true) }));
export type SkillStates = Record<string, { enabled: boolean }>;
type _SkillStatesMatches = Assert<SameType<SkillStates, v.InferOutput<typeof SkillStatesSchema>>>;

export interface Skill {
  readonly name: string;
  readonly description: string;
  readonly license: string | null;
  /** Tool names from `allowed-tools`; null when the skill does not restrict tools. */
  readonly allowedTools: readonly string[] | null;
  /** Folder below the skills root, `/`-separated: `public/pdf`. */
  readonly folder: string;
  readonly category: SkillCategory;
  /** The SKILL.md path the model sees: `/mnt/skills/<folder>/SKILL.md`. */
  readonly path: string;
  readonly storageKey: string;
  /** The whole SKILL.md, front matter included: what slash activation injects. */
  readonly content: string;
  /** The Markdown after the front matter. */
  readonly body: string;
  /** SHA-256 of `content`'s UTF-8 bytes, 64 lowercase hex digits. */
  readonly sha256: string;
  readonly enabled: boolean;
}

export type SkillDiagnosticCode = FrontMatterProblemCode | "unreadable" | "duplicate_name";

/** Why a SKILL.md was left out. Broken skills are skipped and reported, never fatal. */
export interface SkillDiagnostic {
  readonly code: SkillDiagnosticCode;
  readonly folder: string;
  readonly storageKey: string;
  /** The skill's name when known (front matter), otherwise its folder's last segment. */
  readonly name: string;
  readonly message: string;
}

/** One consistent view of the installed skills. */
export interface SkillRegistrySnapshot {
  /** Every installed skill, enabled or not, sorted by name. */
  readonly skills: readonly Skill[];
  readonly diagnostics: readonly SkillDiagnostic[];
  byName(name: string): Skill | undefined;
  /** The skill whose SKILL.md is at this container path (normalised), if any. */
  byPath(path: string): Skill | undefined;
}

export interface SkillRegistry {
  readonly containerPath: string;
  readonly config: Readonly<SkillsConfig>;
  load(): Promise<SkillRegistrySnapshot>;
  /** Every installed skill, enabled or not. */
  list(): Promise<Skill[]>;
  enabledNames(): Promise<string[]>;
  get(name: string): Promise<Skill | undefined>;
  /** A supporting file of a skill (`references/api.md`), or null when it does not exist. */
  readFile(skill: Skill, relativePath: string): Promise<string | null>;
}

export interface SkillRegistryOptions {
  /** The config.yaml `skills` section (validated here). */
  readonly config?: SkillsConfigInput;
  /**
   * extensions_config.json's `skills` toggles, or a function returning the current ones; a
   * function is called on every load so a toggle applies without rebuilding the agent.
   */
  readonly states?: SkillStates | (() => SkillStates | Promise<SkillStates>);
  /** Storage prefix the skills folder is mounted at (default `skills`). */
  readonly prefix?: string;
  /** Called once per skipped SKILL.md on every load (logging, a health endpoint). */
  readonly onDiagnostic?: (diagnostic: SkillDiagnostic) => void;
}

export type SkillRegistryErrorCode = "invalid_skills_config" | "invalid_skill_path";

export class SkillRegistryError extends DeerflowError {
  declare readonly code: SkillRegistryErrorCode;

  constructor(code: SkillRegistryErrorCode, message: string) {
    super(code, message);
    this.name = "SkillRegistryError";
  }
}

/** `input` (undefined or null reads as `{}`) parsed by `schema`; the first issue fails naming `section` and the key's path. */
function parseSkillsSection<TSchema extends v.GenericSchema>(schema: TSchema, input: unknown, section: string, hint: string): v.InferOutput<TSchema> {
  const result = v.safeParse(schema, input ?? {});
  if (result.success) return result.output;
  const issue = result.issues[0];
  const path = v.getDotPath(issue);
  throw new SkillRegistryError("invalid_skills_config", `${section}${path ? `.${path}` : ""}: ${issue.message}. ${hint}`);
}

export function parseSkillsConfig(input: unknown): SkillsConfig {
  return parseSkillsSection(SkillsConfigSchema, input, "skills", "Fix this key in the skills section of config.yaml.");
}

function parseSkillStates(input: unknown): SkillStates {
  return parseSkillsSection(SkillStatesSchema, input, "extensions skills", 'Each entry looks like { "enabled": true }.');
}

/** The SKILL.md path the model sees for a skill folder. */
export function skillContainerFilePath(containerPath: string, folder: string): string {
  const root = normalizePosixPath(containerPath);
  return `${root === "/" ? "" : root}/${folder}/${SKILL_FILE_NAME}`;
}

export function createSkillRegistry(storage: KeyValue, options: SkillRegistryOptions = {}): SkillRegistry {
  const config = Object.freeze(parseSkillsConfig(options.config));
  const containerPath = normalizePosixPath(config.container_path);
  const prefix = (options.prefix ?? DEFAULT_SKILLS_STORAGE_PREFIX).split(/[:/]/).filter(Boolean).join(":");
  const allowList = config.enabled === "all" ? null : new Set(config.enabled);

  async function currentStates(): Promise<SkillStates> {
    const raw = typeof options.states === "function" ? await options.states() : options.states;
    return parseSkillStates(raw);
  }

  async function load(): Promise<SkillRegistrySnapshot> {
    const [keys, states] = await Promise.all([storage.getKeys(prefix), currentStates()]);
    const folders = packageFolders(keys, prefix);
    const diagnostics: SkillDiagnostic[] = [];
    const loaded = await Promise.all(
      folders.map(async (folder) => {
        const storageKey = `${prefix}:${folder.split("/").join(":")}:${SKILL_FILE_NAME}`;
        const fallbackName = folder.split("/").at(-1)!;
        const content = decodeText(await storage.getItemRaw(storageKey));
        if (content === undefined) {
          return {
            diagnostic: {
              code: "unreadable",
              folder,
              storageKey,
              name: fallbackName,
              message: "SKILL.md could not be read as UTF-8 text.",
            } satisfies SkillDiagnostic,
          };
        }
        const parsed = parseSkillMarkdown(content);
        if (!parsed.ok) {
          return {
            diagnostic: {
              code: parsed.problem.code,
              folder,
              storageKey,
              name: parsed.problem.name ?? fallbackName,
              message: `${storageKey}: ${parsed.problem.message}`,
            } satisfies SkillDiagnostic,
          };
        }
        const { name, description, license, allowedTools } = parsed.frontMatter;
        const skill: Skill = Object.freeze({
          name,
          description,
          license,
          allowedTools,
          folder,
          category: categoryOf(folder),
          path: skillContainerFilePath(containerPath, folder),
          storageKey,
          content,
          body: parsed.body,
          sha256: await sha256Hex(content),
          enabled: (allowList === null || allowList.has(name)) && (states[name]?.enabled ?? true),
        });
        return { skill };
      }),
    );

    const byName = new Map<string, Skill>();
    for (const entry of loaded) {
      if (entry.diagnostic) {
        diagnostics.push(entry.diagnostic);
        continue;
      }
      const skill = entry.skill!;
      const existing = byName.get(skill.name);
      if (existing === undefined) {
        byName.set(skill.name, skill);
        continue;
      }
      // A user's custom skill deliberately shadows a bundled one of the same name; any other
      // clash keeps the first folder in sorted order so the choice never depends on listing order.
      const keep = existing.category !== "custom" && skill.category === "custom" ? skill : existing;
      const drop = keep === skill ? existing : skill;
      byName.set(skill.name, keep);
      diagnostics.push({
        code: "duplicate_name",
        folder: drop.folder,
        storageKey: drop.storageKey,
        name: drop.name,
        message: `${drop.storageKey}: skill name "${drop.name}" is also used by ${keep.storageKey}, which wins; rename one of them.`,
      });
    }
    for (const diagnostic of diagnostics) options.onDiagnostic?.(diagnostic);

    const skills = Object.freeze([...byName.values()].sort((a, b) => compareText(a.name, b.name)));
    const byPath = new Map(skills.map((skill) => [skill.path, skill]));
    return Object.freeze({
      skills,
      diagnostics: Object.freeze(diagnostics),
      byName: (name: string) => byName.get(name),
      byPath: (path: string) => (typeof path === "string" && path.startsWith("/") ? byPath.get(normalizePosixPath(path)) : undefined),
    });
  }

  return Object.freeze({
    containerPath,
    config,
    load,
    async list() {
      return [...(await load()).skills];
    },
    async enabledNames() {
      return (await load()).skills.filter((skill) => skill.enabled).map((skill) => skill.name);
    },
    async get(name: string) {
      return (await load()).byName(name);
    },
    async readFile(skill: Skill, relativePath: string) {
      const segments = relativePath.split("/");
      if (relativePath === "" || relativePath.startsWith("/") || segments.some((s) => s === "" || s === "." || s === ".." || s.includes(":"))) {
        throw new SkillRegistryError(
          "invalid_skill_path",
          `"${relativePath}" is not a file inside skill "${skill.name}"; give a relative path such as references/api.md.`,
        );
      }
      const key = `${prefix}:${skill.folder.split("/").join(":")}:${segments.join(":")}`;
      const raw = await storage.getItemRaw(key);
      if (raw === null || raw === undefined) return null;
      return decodeText(raw) ?? null;
    },
  });
}

/**
 * Folders holding a SKILL.md, `/`-separated. A folder with a SKILL.md is a package boundary: a
 * SKILL.md deeper inside belongs to that package (an eval fixture, a template), not to the
 * registry. Dot folders are never skills.
 */
function packageFolders(keys: readonly string[], prefix: string): string[] {
  const candidates: string[][] = [];
  for (const key of keys) {
    if (!key.startsWith(`${prefix}:`)) continue;
    const segments = key.slice(prefix.length + 1).split(":");
    if (segments.at(-1) !== SKILL_FILE_NAME) continue;
    const folder = segments.slice(0, -1);
    if (folder.length === 0 || folder.some((segment) => segment === "" || segment.startsWith("."))) continue;
    candidates.push(folder);
  }
  candidates.sort((a, b) => a.length - b.length || compareText(a.join("/"), b.join("/")));
  const accepted: string[][] = [];
  for (const folder of candidates) {
    const inside = accepted.some((outer) => outer.length < folder.length && outer.every((segment, i) => folder[i] === segment));
    if (!inside) accepted.push(folder);
  }
  return accepted.map((folder) => folder.join("/")).sort(compareText);
}

// Locale-independent, so two hosts order (and break name clashes) the same way.
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function categoryOf(folder: string): SkillCategory {
  const first = folder.split("/")[0];
  // A flat layout (skills/<name>) is a bundled, read-only skill like DeerFlow's public ones.
  return (SKILL_CATEGORIES as readonly string[]).includes(first ?? "") ? (first as SkillCategory) : "public";
}

/** Text of a raw storage value: fs drivers hand back bytes, memory drivers the stored string. */
function decodeText(raw: unknown): string | undefined {
  if (typeof raw === "string") return raw.charCodeAt(0) === 0xfeff ? raw.slice(1) : raw;
  let bytes: Uint8Array | undefined;
  if (raw instanceof Uint8Array) bytes = raw;
  else if (raw instanceof ArrayBuffer) bytes = new Uint8Array(raw);
  if (bytes === undefined) return undefined;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
