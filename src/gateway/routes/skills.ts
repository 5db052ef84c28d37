import type { Hono } from "hono";
import * as v from "valibot";
import type { LeadConfig } from "../../agents/app-config.ts";
import { DeerflowError } from "../../core/errors.ts";
import type { DeploymentFiles } from "../../ports/deployment-files.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import { SandboxError, type SandboxProvider } from "../../ports/sandbox.ts";
import type { VersionedKeyValue } from "../../ports/versioned-key-value.ts";
import { isValidThreadId } from "../../runtime/thread-store.ts";
import { DEFAULT_SKILL_ARCHIVE_MAX_BYTES, DEFAULT_SKILL_ARCHIVE_MAX_ENTRIES, readSkillArchive, type SkillArchive } from "../../skills/archive.ts";
import type { Skill } from "../../skills/registry.ts";
import { deploymentSkillRegistry, SkillStateStore } from "../../skills/states.ts";
import { httpError, parseJsonObjectBody } from "../errors.ts";
import type { GatewayEnv, RouteGuard } from "../types.ts";
import { readThreadFile, threadVirtualPath } from "./files.ts";

/*
 * /api/skills: Settings -> Skills of DeerFlow's UI. Skills belong to the deployment: every
 * signed-in user lists them, only an administrator switches one on or off or installs one. A
 * toggle is a compare-and-set on the deployment's skill-state record; an install unpacks a
 * `.skill` archive from one of the caller's thread files into `custom/<name>` of the skills
 * folder, whole or not at all. Both reach the next run without a restart (the agent factory keys
 * its builds by the enabled skills).
 */

export interface SkillRouteDeps {
  readonly storage: KeyValue;
  readonly versioned: VersionedKeyValue;
  readonly config: Pick<LeadConfig, "skills">;
  readonly guard: RouteGuard;
  readonly sandbox: SandboxProvider;
  /** The writable skills folder; absent where the deployment has none (no skills.path, no file system). */
  readonly skillsFolder?: DeploymentFiles;
}

/** A skill as the UI's Skill type reads it (frontend/src/core/skills/type.ts). */
export interface SkillJson {
  readonly name: string;
  readonly description: string;
  readonly license: string | null;
  readonly category: string;
  readonly enabled: boolean;
  /** Only installed (custom) skills are the user's own to edit. */
  readonly editable: boolean;
}

export function skillJson(skill: Skill): SkillJson {
  return {
    name: skill.name,
    description: skill.description,
    license: skill.license,
    category: skill.category,
    enabled: skill.enabled,
    editable: skill.category === "custom",
  };
}

const SkillUpdateSchema = v.strictObject({ enabled: v.boolean() });

const SkillInstallSchema = v.strictObject({
  thread_id: v.pipe(
    v.string(),
    v.check((id: string) => isValidThreadId(id), 'expected a thread id: 1 to 64 letters, digits, "_" or "-"'),
  ),
  path: v.pipe(v.string(), v.nonEmpty("expected the virtual path of a .skill file, such as /mnt/user-data/outputs/my-skill.skill")),
});

const WHAT = "the skills";

export function registerSkillRoutes(api: Hono<GatewayEnv>, deps: SkillRouteDeps): void {
  const { guard } = deps;
  const states = new SkillStateStore({ storage: deps.storage, versioned: deps.versioned });
  const registry = deploymentSkillRegistry({ storage: deps.storage, versioned: deps.versioned, config: deps.config.skills ?? {} });

  api.get("/skills", async (c) => c.json({ skills: (await registry.list()).map(skillJson) }));

  api.get("/skills/:name", async (c) => {
    const name = c.req.param("name");
    const skill = await registry.get(name);
    if (!skill) throw httpError(404, `Skill '${name}' not found`);
    return c.json(skillJson(skill));
  });

  api.put("/skills/:name", async (c) => {
    guard.administrator(c, WHAT);
    const name = c.req.param("name");
    const body = await parseJsonObjectBody(c, SkillUpdateSchema);
    if (!(await registry.get(name))) throw httpError(404, `Skill '${name}' not found; GET /api/skills lists the installed ones.`);
    const allowList = registry.config.enabled;
    if (body.enabled && allowList !== "all" && !allowList.includes(name)) {
      throw httpError(409, `Skill '${name}' cannot be enabled here: skills.enabled in config.yaml does not list it; add it there (or set skills.enabled: all).`);
    }
    await states.setEnabled(name, body.enabled);
    const updated = await registry.get(name);
    if (!updated) throw httpError(404, `Skill '${name}' not found`);
    return c.json(skillJson(updated));
  });

  api.post("/skills/install", async (c) => {
    guard.administrator(c, WHAT);
    const body = await parseJsonObjectBody(c, SkillInstallSchema);
    const folder = deps.skillsFolder;
    if (!folder) {
      throw httpError(
        501,
        "This gateway has no writable skills folder, so skills cannot be installed here (no skills.path in config.yaml, or a runtime without a file system such as Deno Deploy or Workers). Add the skill's folder to the skills folder of a deployment that has one; listing and switching skills on or off still work.",
      );
    }
    const thread = await guard.thread(c, "threads:read", body.thread_id, { requireExisting: true });
    const virtualPath = threadVirtualPath(body.path);
    let bytes: Uint8Array;
    try {
      bytes = await readThreadFile(deps.sandbox, c, body.thread_id, thread, virtualPath);
    } catch (error) {
      if (error instanceof SandboxError && error.code === "not_found") throw httpError(404, `Skill file not found: ${virtualPath}`);
      if (error instanceof SandboxError && error.code === "is_directory") throw httpError(400, `Path is not a file: ${virtualPath}; name the .skill file.`);
      throw error;
    }
    let archive: SkillArchive;
    try {
      archive = await readSkillArchive(bytes, { maxEntries: DEFAULT_SKILL_ARCHIVE_MAX_ENTRIES, maxBytes: DEFAULT_SKILL_ARCHIVE_MAX_BYTES });
    } catch (error) {
      if (error instanceof DeerflowError && error.code === "skill_archive_rejected") throw httpError(422, `Invalid skill archive ${virtualPath}: ${error.message}`);
      throw error;
    }
    // Upstream refuses, never overwrites. Any skill of the name counts, not only a custom one: a
    // custom skill would silently shadow the bundled one of the same name.
    const exists = () => httpError(409, `Skill '${archive.name}' already exists; remove its folder from the skills folder first, or rename the skill in its SKILL.md.`);
    if (await registry.get(archive.name)) throw exists();
    if (!(await folder.createFolder(`custom/${archive.name}`, archive.files))) throw exists();
    return c.json({ success: true, skill_name: archive.name, message: `Skill '${archive.name}' installed successfully` });
  });
}
