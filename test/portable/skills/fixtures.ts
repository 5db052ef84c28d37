import { createSkillRegistry, type SkillRegistry, type SkillRegistryOptions } from "../../../src/skills/registry.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";

/** A SKILL.md with the given front matter (extra lines go inside the block) and body. */
export function skillMarkdown(name: string, description: string, extra = "", body = `# ${name}\nDo the thing.\n`): string {
  return `---\nname: ${name}\ndescription: ${description}\n${extra}---\n\n${body}`;
}

/** A memory-backed registry holding `files` (storage key -> SKILL.md text), plus a count of its loads. */
export async function memoryRegistry(
  files: Record<string, string>,
  options: SkillRegistryOptions = {},
): Promise<{ registry: SkillRegistry; storage: KeyValue; loads: () => number; failNextLoads: (error?: Error) => void }> {
  const storage = createMemoryKeyValue();
  for (const [key, text] of Object.entries(files)) await storage.setItem(key, text);
  const inner = createSkillRegistry(storage, options);
  let loads = 0;
  let failure: Error | undefined;
  const registry: SkillRegistry = {
    ...inner,
    containerPath: inner.containerPath,
    config: inner.config,
    async load() {
      loads++;
      if (failure) throw failure;
      return inner.load();
    },
  };
  return {
    registry,
    storage,
    loads: () => loads,
    failNextLoads: (error = new Error("storage unavailable")) => {
      failure = error;
    },
  };
}
