import * as v from "valibot";
import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { parseStoredJson, updateVersioned, versionedOver } from "../storage/versioned.ts";
import { createSkillRegistry, SkillStatesSchema, type SkillRegistry, type SkillsConfigInput, type SkillStates } from "./registry.ts";

/*
 * Which installed skills the deployment has switched off: one record, `deployment:skills:states`,
 * shaped like extensions_config.json's `skills` map ({ "<name>": { "enabled": false } }). Skills
 * belong to the deployment, so there is one record for every user, and every toggle is a
 * compare-and-set on it: two administrators toggling two skills at once both land.
 */

export const SKILL_STATES_KEY = "deployment:skills:states";

const StoredStatesSchema = v.object({ v: v.literal(1), skills: SkillStatesSchema });

export interface SkillStateStoreOptions {
  readonly storage: KeyValue;
  /** Compare-and-set over the same keys; default: the in-process one over `storage`. */
  readonly versioned?: VersionedKeyValue;
}

export class SkillStateStore {
  readonly #versioned: VersionedKeyValue;

  constructor(options: SkillStateStoreOptions) {
    this.#versioned = options.versioned ?? versionedOver(options.storage);
  }

  /** The toggles as they are now; a record that is not one reads as "nothing switched off". */
  async read(): Promise<SkillStates> {
    return statesOf((await this.#versioned.read(SKILL_STATES_KEY)).value);
  }

  /** Records the skill's state and returns every toggle after the write. */
  async setEnabled(name: string, enabled: boolean): Promise<SkillStates> {
    const next = await updateVersioned(this.#versioned, SKILL_STATES_KEY, (current) => {
      const skills = { ...statesOf(current), [name]: { enabled } };
      return { value: JSON.stringify({ v: 1, skills }), result: skills };
    });
    return next ?? (await this.read());
  }
}

function statesOf(text: string | null): SkillStates {
  const parsed = v.safeParse(StoredStatesSchema, parseStoredJson(text));
  return parsed.success ? parsed.output.skills : {};
}

/** The skills registry every run of a deployment reads: the skills folder, with the stored toggles applied on every load. */
export function deploymentSkillRegistry(options: SkillStateStoreOptions & { readonly config?: SkillsConfigInput }): SkillRegistry {
  const states = new SkillStateStore(options);
  return createSkillRegistry(options.storage, { config: options.config ?? {}, states: () => states.read() });
}
