import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createFsDeploymentFiles } from "../../../adapters/shared/fs-deployment-files.ts";
import { createFsDriver } from "../../../adapters/shared/fs-key-value.ts";
import { createGatewayHost } from "../../../adapters/shared/gateway-host.ts";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { openGateway } from "../../../src/cli/serve.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { AgentScope, Placement } from "../../../src/extension-api/index.ts";
import type { ModuleLoader } from "../../../src/ports/module-loader.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { acceptanceGateways, call, human, send } from "../../fixtures/plugins/gateway-harness.ts";
import { zip, type ZipEntry } from "../../fixtures/skill-zip.ts";
import { ENV, auth, admin, user, withBody } from "./ui-callers.ts";

/*
 * Settings -> Skills of DeerFlow's UI against a real gateway with api_key auth: the list with its
 * enabled states, a toggle (administrators only), and installing a `.skill` archive the user
 * uploaded to a thread into the skills folder on disk (read by the registry through the same
 * read-only storage mount `serve` gives it). What the model sees on the next run is recorded by a
 * middleware placed next to the model.
 */


interface ModelCall {
  readonly system: string;
  readonly messages: string[];
}

/** A plugin whose middleware, next to the model, records the system prompt and messages of every model call. */
function recordingLoader(calls: ModelCall[]): ModuleLoader {
  const text = (content: unknown) => (typeof content === "string" ? content : JSON.stringify(content));
  return {
    async load() {
      return {
        install: (registry: { middlewares(c: unknown): void }) =>
          registry.middlewares({
            contributeMiddlewares: () => [
              {
                middleware: {
                  name: "ui_skills_recorder",
                  wrapModelCall(request: { systemMessage?: { content: unknown }; messages: { content: unknown }[] }, handler: (r: unknown) => Promise<unknown>) {
                    calls.push({ system: text(request.systemMessage?.content ?? ""), messages: request.messages.map((m) => text(m.content)) });
                    return handler(request);
                  },
                },
                placement: Placement.MODEL_PHYSICAL,
                scope: AgentScope.LEAD,
              },
            ],
          }),
      };
    },
  };
}

const skillMd = (name: string, description: string, body = "") => `---\nname: ${name}\ndescription: ${description}\n---\n# ${name}\n${body}`;

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

/** A gateway over a skills folder on disk holding two bundled skills; writable unless said otherwise. */
async function skillsGateway(options: { writable?: boolean; skills?: Record<string, unknown> } = {}) {
  const dir = await mkdtemp(join(tmpdir(), "deerflow-ui-skills-"));
  dirs.push(dir);
  for (const [name, description] of [["data-analysis", "Analyze structured data and produce charts."], ["frontend-design", "Create polished frontend interfaces."]]) {
    await mkdir(join(dir, "public", name!), { recursive: true });
    await writeFile(join(dir, "public", name!, "SKILL.md"), skillMd(name!, description!));
  }
  const storage = createMemoryKeyValue();
  storage.mount("skills", createFsDriver(dir, { readOnly: true }));
  const calls: ModelCall[] = [];
  const { gateway } = await gatewayWith(
    { gateway: { auth }, plugins: [{ use: "./recorder.ts:install" }], ...(options.skills ? { skills: options.skills } : {}) },
    { loader: recordingLoader(calls), storage, ...(options.writable === false ? {} : { skillsFolder: createFsDeploymentFiles(dir, "the skills folder") }) },
  );
  return { gateway, dir, calls };
}

type SkillsGateway = Awaited<ReturnType<typeof skillsGateway>>["gateway"];

/** A run as the user, on a fresh thread; the last model call's system prompt and the run's last message. */
async function runAs(gateway: SkillsGateway, calls: ModelCall[], threadId: string, prompt: string) {
  await call(gateway, "POST", "/api/threads", withBody(user, { thread_id: threadId }));
  const before = calls.length;
  const run = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, withBody(user, { input: human(prompt) }));
  expect(run.status).toBe(200);
  const last = run.body.messages.at(-1);
  return { modelCalls: calls.slice(before), reply: typeof last.content === "string" ? last.content : JSON.stringify(last.content) };
}

/** Uploads `bytes` as `name` to the admin's thread `threadId` (created first); the virtual path. */
async function upload(gateway: SkillsGateway, threadId: string, name: string, bytes: Uint8Array): Promise<string> {
  await call(gateway, "POST", "/api/threads", withBody(admin, { thread_id: threadId }));
  const form = new FormData();
  form.append("files", new File([bytes as Uint8Array<ArrayBuffer>], name, { type: "application/zip" }));
  const res = await send(gateway, "POST", `/api/threads/${threadId}/uploads`, { ...admin, form });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { files: { virtual_path: string }[] };
  return body.files[0]!.virtual_path;
}

const PDF_SKILL = skillMd("pdf-tools", "Work with PDF files.", "Always say PDF-MARKER-42 first.\n");

async function tree(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) out.push(join(entry.parentPath, entry.name).slice(dir.length + 1));
  }
  return out.sort();
}

describe("/api/skills", () => {
  it("lists every skill with its enabled state in the UI's shape, to every signed-in user", async () => {
    const { gateway } = await skillsGateway();
    const res = await call(gateway, "GET", "/api/skills", user);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      skills: [
        { name: "data-analysis", description: "Analyze structured data and produce charts.", license: null, category: "public", enabled: true, editable: false },
        { name: "frontend-design", description: "Create polished frontend interfaces.", license: null, category: "public", enabled: true, editable: false },
      ],
    });
    expect((await call(gateway, "GET", "/api/skills", {})).status).toBe(401);
  });

  it("lets an administrator switch a skill off and on; a user's toggle is 403 and changes nothing", async () => {
    const { gateway } = await skillsGateway();
    const denied = await call(gateway, "PUT", "/api/skills/data-analysis", withBody(user, { enabled: false }));
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toContain("Only an administrator may change the skills");
    expect((await call(gateway, "GET", "/api/skills", user)).body.skills[0].enabled).toBe(true);

    const off = await call(gateway, "PUT", "/api/skills/data-analysis", withBody(admin, { enabled: false }));
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ name: "data-analysis", enabled: false });
    const listed = (await call(gateway, "GET", "/api/skills", user)).body.skills;
    expect(listed.map((s: { name: string; enabled: boolean }) => [s.name, s.enabled])).toEqual([["data-analysis", false], ["frontend-design", true]]);

    const on = await call(gateway, "PUT", "/api/skills/data-analysis", withBody(admin, { enabled: true }));
    expect(on.body).toMatchObject({ name: "data-analysis", enabled: true });

    expect((await call(gateway, "PUT", "/api/skills/nope", withBody(admin, { enabled: false }))).status).toBe(404);
    const bad = await call(gateway, "PUT", "/api/skills/data-analysis", withBody(admin, { enabled: "no" }));
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toContain("enabled");
  });

  it("will not enable a skill config.yaml's skills.enabled leaves out (409), and lists it disabled", async () => {
    const { gateway } = await skillsGateway({ skills: { enabled: ["frontend-design"] } });
    expect((await call(gateway, "GET", "/api/skills", user)).body.skills.map((s: { enabled: boolean }) => s.enabled)).toEqual([false, true]);
    const res = await call(gateway, "PUT", "/api/skills/data-analysis", withBody(admin, { enabled: true }));
    expect(res.status).toBe(409);
    expect(res.body.detail).toContain("skills.enabled in config.yaml does not list it");
    expect((await call(gateway, "PUT", "/api/skills/frontend-design", withBody(admin, { enabled: false }))).body.enabled).toBe(false);
  });

  it("toggles concurrently without losing one: both skills end up off", async () => {
    const { gateway } = await skillsGateway();
    const [a, b] = await Promise.all([
      call(gateway, "PUT", "/api/skills/data-analysis", withBody(admin, { enabled: false })),
      call(gateway, "PUT", "/api/skills/frontend-design", withBody(admin, { enabled: false })),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect((await call(gateway, "GET", "/api/skills", user)).body.skills.map((s: { enabled: boolean }) => s.enabled)).toEqual([false, false]);
  });

  it("a disabled skill is gone from the next run's system prompt, and its slash command is refused", async () => {
    const { gateway, calls } = await skillsGateway();
    const first = await runAs(gateway, calls, "t-1", "hello");
    expect(first.modelCalls[0]!.system).toContain('<skill name="data-analysis" path="/mnt/skills/public/data-analysis/SKILL.md">');

    expect((await call(gateway, "PUT", "/api/skills/data-analysis", withBody(admin, { enabled: false }))).status).toBe(200);
    const next = await runAs(gateway, calls, "t-2", "hello again");
    expect(next.modelCalls[0]!.system).not.toContain("data-analysis");
    expect(next.modelCalls[0]!.system).toContain('<skill name="frontend-design"');

    const slash = await runAs(gateway, calls, "t-3", "/data-analysis chart this");
    expect(slash.reply).toContain("Skill `/data-analysis` is installed but disabled");
  });
});

describe("POST /api/skills/install", () => {
  it("installs an uploaded .skill archive into custom/<name>; the next run lists it and /pdf-tools injects it", async () => {
    const { gateway, dir, calls } = await skillsGateway();
    const archive = await zip([
      { name: "pdf-tools/" },
      { name: "pdf-tools/SKILL.md", data: PDF_SKILL, deflate: true },
      { name: "pdf-tools/references/api.md", data: "# API\n" },
    ]);
    const path = await upload(gateway, "t-up", "pdf-tools.skill", archive);
    expect(path).toBe("/mnt/user-data/uploads/pdf-tools.skill");

    const denied = await call(gateway, "POST", "/api/skills/install", withBody(user, { thread_id: "t-up", path }));
    expect(denied.status).toBe(403);
    expect(await tree(dir)).not.toContain("custom/pdf-tools/SKILL.md");

    const res = await call(gateway, "POST", "/api/skills/install", withBody(admin, { thread_id: "t-up", path }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, skill_name: "pdf-tools", message: "Skill 'pdf-tools' installed successfully" });
    expect(await tree(dir)).toEqual([
      "custom/pdf-tools/SKILL.md",
      "custom/pdf-tools/references/api.md",
      "public/data-analysis/SKILL.md",
      "public/frontend-design/SKILL.md",
    ]);
    const listed = (await call(gateway, "GET", "/api/skills", user)).body.skills;
    expect(listed).toContainEqual({ name: "pdf-tools", description: "Work with PDF files.", license: null, category: "custom", enabled: true, editable: true });

    const run = await runAs(gateway, calls, "t-run", "/pdf-tools summarize the report");
    expect(run.modelCalls[0]!.system).toContain('<skill name="pdf-tools" path="/mnt/skills/custom/pdf-tools/SKILL.md">Work with PDF files.</skill>');
    expect(run.modelCalls[0]!.messages.join("\n")).toContain("Always say PDF-MARKER-42 first.");

    // The same name again: 409, the installed copy untouched.
    const again = await call(gateway, "POST", "/api/skills/install", withBody(admin, { thread_id: "t-up", path }));
    expect(again.status).toBe(409);
    expect(again.body.detail).toContain("Skill 'pdf-tools' already exists");
  });

  it("refuses a hostile archive whole, naming the entry, with nothing written", async () => {
    const { gateway, dir } = await skillsGateway();
    const before = await tree(dir);
    const good = { name: "SKILL.md", data: PDF_SKILL };
    const cases: [string, ZipEntry[], RegExp][] = [
      ["climb.skill", [good, { name: "../../escape.txt", data: "x" }], /Entry "\.\.\/\.\.\/escape\.txt" climbs out/],
      ["absolute.skill", [good, { name: "/etc/cron.d/evil", data: "x" }], /Entry "\/etc\/cron\.d\/evil" has an absolute path/],
      ["link.skill", [good, { name: "secrets", data: "/etc/passwd", mode: 0o120777 }], /Entry "secrets" is a symbolic link/],
      ["bomb.skill", [good, { name: "bomb.txt", data: "a".repeat(4096), deflate: true, claimedSize: 10 }], /"bomb\.txt" unpacks to more bytes/],
    ];
    for (const [name, entries, message] of cases) {
      const path = await upload(gateway, "t-bad", name, await zip(entries));
      const res = await call(gateway, "POST", "/api/skills/install", withBody(admin, { thread_id: "t-bad", path }));
      expect(res.status, name).toBe(422);
      expect(res.body.detail, name).toMatch(message);
    }
    expect(await tree(dir)).toEqual(before);
    expect((await call(gateway, "GET", "/api/skills", user)).body.skills.map((s: { name: string }) => s.name)).toEqual(["data-analysis", "frontend-design"]);
  });

  it("refuses a bad body, a missing file, a path outside the thread's files and an installed name", async () => {
    const { gateway, dir } = await skillsGateway();
    await call(gateway, "POST", "/api/threads", withBody(admin, { thread_id: "t-x" }));
    const body = (b: unknown) => withBody(admin, b);
    const noPath = await call(gateway, "POST", "/api/skills/install", body({ thread_id: "t-x" }));
    expect([noPath.status, noPath.body.detail]).toEqual([422, expect.stringContaining("path")]);
    const badThread = await call(gateway, "POST", "/api/skills/install", body({ thread_id: "../t", path: "/mnt/user-data/uploads/a.skill" }));
    expect([badThread.status, badThread.body.detail]).toEqual([422, expect.stringContaining("thread_id")]);
    expect((await call(gateway, "POST", "/api/skills/install", body({ thread_id: "t-x", path: "/mnt/user-data/uploads/none.skill" }))).status).toBe(404);
    expect((await call(gateway, "POST", "/api/skills/install", body({ thread_id: "t-x", path: "/etc/passwd" }))).status).toBe(403);
    expect((await call(gateway, "POST", "/api/skills/install", body({ thread_id: "t-x", path: "/mnt/user-data/../../etc/passwd" }))).status).toBe(403);
    // Another user's thread reads as missing.
    await call(gateway, "POST", "/api/threads", withBody(user, { thread_id: "t-users" }));
    expect((await call(gateway, "POST", "/api/skills/install", body({ thread_id: "t-users", path: "/mnt/user-data/uploads/a.skill" }))).status).toBe(404);

    // A bundled skill's name is taken too: a custom copy would shadow it.
    const path = await upload(gateway, "t-x", "dup.skill", await zip([{ name: "SKILL.md", data: skillMd("data-analysis", "Mine.") }]));
    const dup = await call(gateway, "POST", "/api/skills/install", body({ thread_id: "t-x", path }));
    expect(dup.status).toBe(409);
    expect(await tree(dir)).not.toContain("custom/data-analysis/SKILL.md");
  });

  it("answers 501 naming why where the skills folder is not writable; listing and toggling still work", async () => {
    const { gateway } = await skillsGateway({ writable: false });
    const path = await upload(gateway, "t-ro", "pdf-tools.skill", await zip([{ name: "SKILL.md", data: PDF_SKILL }]));
    const res = await call(gateway, "POST", "/api/skills/install", withBody(admin, { thread_id: "t-ro", path }));
    expect(res.status).toBe(501);
    expect(res.body.detail).toContain("no writable skills folder");
    expect((await call(gateway, "PUT", "/api/skills/data-analysis", withBody(admin, { enabled: false }))).body.enabled).toBe(false);
    expect((await call(gateway, "GET", "/api/skills", user)).body.skills).toHaveLength(2);
  });
});

describe("as `serve` builds it", () => {
  it("reads skills from skills.path and installs into it, with no restart", async () => {
    const dir = await mkdtemp(join(tmpdir(), "deerflow-serve-skills-"));
    dirs.push(dir);
    await mkdir(join(dir, "public", "data-analysis"), { recursive: true });
    await writeFile(join(dir, "public", "data-analysis", "SKILL.md"), skillMd("data-analysis", "Analyze data."));
    const config = validateLeadConfig({ storage: { driver: "memory" }, skills: { path: dir } }, "serve.yaml");
    const host = createGatewayHost({ env: mapEnv({}), stderr: { write: () => undefined, isTTY: false } });
    const { gateway, close } = await openGateway(host, { config, configDir: dir, hostname: "127.0.0.1" });
    try {
      // Auth off on loopback: every caller is the administrator.
      expect((await call(gateway, "GET", "/api/skills")).body.skills.map((s: { name: string }) => s.name)).toEqual(["data-analysis"]);
      await call(gateway, "POST", "/api/threads", { body: { thread_id: "t-serve" } });
      const form = new FormData();
      form.append("files", new File([(await zip([{ name: "SKILL.md", data: PDF_SKILL }])) as Uint8Array<ArrayBuffer>], "pdf-tools.skill"));
      expect((await send(gateway, "POST", "/api/threads/t-serve/uploads", { form })).status).toBe(200);
      const res = await call(gateway, "POST", "/api/skills/install", { body: { thread_id: "t-serve", path: "mnt/user-data/uploads/pdf-tools.skill" } });
      expect(res.status).toBe(200);
      expect(await tree(dir)).toEqual(["custom/pdf-tools/SKILL.md", "public/data-analysis/SKILL.md"]);
      expect((await call(gateway, "GET", "/api/skills")).body.skills.map((s: { name: string }) => s.name)).toEqual(["data-analysis", "pdf-tools"]);
    } finally {
      await close();
    }
  });
});
