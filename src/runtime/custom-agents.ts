import * as v from "valibot";
import { CUSTOM_AGENT_NAME_MAX_LENGTH, normalizeCustomAgentName, REASONING_EFFORTS, type CustomAgent, type CustomAgentModelSettings } from "../agents/custom-agent.ts";
import { systemClock } from "../core/clock.ts";
import { DeerflowError } from "../core/errors.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { Clock } from "../ports/runtime-ports.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { parseStoredJson, updateVersioned, versionedOver } from "../storage/versioned.ts";
import type { AgentSetupOutcome, AgentSetupPort } from "../tools/setup-agent.ts";
import { isDeploymentAdministrator, RunOperationError, type RunPrincipal } from "./runs/types.ts";

/*
 * The deployment's custom agents, one KeyValue record per agent under `deployment:agents:<name>`
 * (config and SOUL together, so a reader never sees one without the other). Every write is a
 * compare-and-set on that record, so two workers creating one name cannot both succeed and two
 * concurrent updates both land.
 */

export const CUSTOM_AGENTS_PREFIX = "deployment:agents";

/** What a caller sets: everything but the stamps. */
export type CustomAgentFields = Omit<CustomAgent, "name" | "created_at" | "updated_at">;

/** An update: an absent field is kept; `model_settings` merges by sub-field (a null sub-field clears it). */
export type CustomAgentPatch = Partial<Omit<CustomAgentFields, "model_settings">> & {
  readonly model_settings?: { readonly temperature?: number | null; readonly max_tokens?: number | null } | null;
};

const StoredAgentSchema = v.object({
  v: v.literal(1),
  name: v.string(),
  description: v.string(),
  model: v.nullable(v.string()),
  tool_groups: v.nullable(v.array(v.string())),
  skills: v.nullable(v.array(v.string())),
  model_settings: v.nullable(v.object({ temperature: v.optional(v.number()), max_tokens: v.optional(v.number()) })),
  thinking_enabled: v.nullable(v.boolean()),
  reasoning_effort: v.nullable(v.picklist(REASONING_EFFORTS)),
  soul: v.string(),
  created_at: v.string(),
  updated_at: v.string(),
});

/** A stored agent record that is not one (hand-edited, half-written): the key to repair is named. */
export class CustomAgentStoreError extends DeerflowError {
  declare readonly code: "corrupt_custom_agent";
  readonly status = 500;
  constructor(key: string) {
    super("corrupt_custom_agent", `The stored custom agent ${key} is unreadable; delete the key or restore it from a backup.`);
    this.name = "CustomAgentStoreError";
  }
}

/** The refusal of a run whose `context.agent_name` names no custom agent. */
export function unknownCustomAgent(name: string): RunOperationError {
  return new RunOperationError(
    "unknown_agent",
    `context.agent_name ${JSON.stringify(name)} names no custom agent; create it first (POST /api/agents) or leave agent_name out.`,
  );
}

/** A new agent's fields before a patch: what POST /api/agents stores for a body with only a name. */
export const EMPTY_AGENT_FIELDS: CustomAgentFields = Object.freeze({
  description: "",
  model: null,
  tool_groups: null,
  skills: null,
  model_settings: null,
  thinking_enabled: null,
  reasoning_effort: null,
  soul: "",
});

export interface CustomAgentStoreOptions {
  readonly storage: KeyValue;
  /** Compare-and-set over the same keys; default: the in-process one over `storage` (one process). */
  readonly versioned?: VersionedKeyValue;
  readonly clock?: Clock;
}

function mergeModelSettings(
  current: CustomAgentModelSettings | null,
  patch: CustomAgentPatch["model_settings"],
): CustomAgentModelSettings | null {
  if (patch === undefined) return current;
  if (patch === null) return null;
  const merged: { temperature?: number; max_tokens?: number } = { ...(current ?? {}) };
  for (const key of ["temperature", "max_tokens"] as const) {
    const value = patch[key];
    if (value === null) delete merged[key];
    else if (value !== undefined) merged[key] = value;
  }
  return Object.keys(merged).length === 0 ? null : merged;
}

export class CustomAgentStore {
  readonly #storage: KeyValue;
  readonly #versioned: VersionedKeyValue;
  readonly #clock: Clock;

  constructor(options: CustomAgentStoreOptions) {
    this.#storage = options.storage;
    this.#versioned = options.versioned ?? versionedOver(options.storage);
    this.#clock = options.clock ?? systemClock;
  }

  #key(name: string): string {
    return `${CUSTOM_AGENTS_PREFIX}:${name}`;
  }

  #parse(key: string, value: unknown): CustomAgent | undefined {
    if (value === null || value === undefined) return undefined;
    const parsed = v.safeParse(StoredAgentSchema, value);
    if (!parsed.success) throw new CustomAgentStoreError(key);
    const { v: _version, ...agent } = parsed.output;
    return agent;
  }

  #stored(agent: CustomAgent): string {
    return JSON.stringify({ v: 1, ...agent });
  }

  /** Every agent, by name; a record that cannot be read is left out of the listing (get() names it). */
  async list(): Promise<CustomAgent[]> {
    const base = `${CUSTOM_AGENTS_PREFIX}:`;
    const keys = (await this.#storage.getKeys(CUSTOM_AGENTS_PREFIX)).filter((key) => key.startsWith(base));
    const items = keys.length === 0 ? [] : await this.#storage.getItems(keys);
    const agents: CustomAgent[] = [];
    for (const { key, value } of items) {
      try {
        const agent = this.#parse(key, value);
        if (agent) agents.push(agent);
      } catch {
        continue;
      }
    }
    return agents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The agent of this name (any case), or undefined when there is none or the name is not valid. */
  async get(name: string): Promise<CustomAgent | undefined> {
    const normalized = normalizeCustomAgentName(name);
    if (normalized === undefined) return undefined;
    const key = this.#key(normalized);
    const { value } = await this.#versioned.read(key);
    return this.#parse(key, parseStoredJson(value));
  }

  /** Creates the agent; undefined when one of that name exists already (nothing is written then). */
  async create(name: string, fields: CustomAgentFields): Promise<CustomAgent | undefined> {
    const normalized = normalizeCustomAgentName(name);
    if (normalized === undefined) return undefined;
    const key = this.#key(normalized);
    return updateVersioned(this.#versioned, key, (current) => {
      if (current !== null) return undefined;
      const now = new Date(this.#clock.now()).toISOString();
      const agent: CustomAgent = { ...fields, name: normalized, created_at: now, updated_at: now };
      return { value: this.#stored(agent), result: agent };
    });
  }

  /** Applies the patch; undefined when there is no such agent. */
  async update(name: string, patch: CustomAgentPatch): Promise<CustomAgent | undefined> {
    const normalized = normalizeCustomAgentName(name);
    if (normalized === undefined) return undefined;
    const key = this.#key(normalized);
    return updateVersioned(this.#versioned, key, (current) => {
      const existing = this.#parse(key, parseStoredJson(current));
      if (!existing) return undefined;
      const agent = this.#patched(existing, patch);
      return { value: this.#stored(agent), result: agent };
    });
  }

  /**
   * Creates the agent from the patch (every other field empty) or applies the patch to the one
   * there is, in one compare-and-set: upstream's setup_agent write. Undefined for an invalid name.
   */
  async upsert(name: string, patch: CustomAgentPatch): Promise<{ agent: CustomAgent; created: boolean } | undefined> {
    const normalized = normalizeCustomAgentName(name);
    if (normalized === undefined) return undefined;
    const key = this.#key(normalized);
    return updateVersioned<{ agent: CustomAgent; created: boolean }>(this.#versioned, key, (current) => {
      const existing = this.#parse(key, parseStoredJson(current));
      if (existing) {
        const agent = this.#patched(existing, patch);
        return { value: this.#stored(agent), result: { agent, created: false } };
      }
      const now = new Date(this.#clock.now()).toISOString();
      const blank: CustomAgent = { ...EMPTY_AGENT_FIELDS, name: normalized, created_at: now, updated_at: now };
      const agent = { ...this.#patched(blank, patch), updated_at: now };
      return { value: this.#stored(agent), result: { agent, created: true } };
    });
  }

  #patched(existing: CustomAgent, patch: CustomAgentPatch): CustomAgent {
    const { model_settings: settingsPatch, ...rest } = patch;
    const defined = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined)) as Partial<CustomAgentFields>;
    return {
      ...existing,
      ...defined,
      model_settings: mergeModelSettings(existing.model_settings, settingsPatch),
      updated_at: new Date(Math.max(this.#clock.now(), Date.parse(existing.updated_at) + 1)).toISOString(),
    };
  }

  /** True when an agent was deleted. */
  async delete(name: string): Promise<boolean> {
    const normalized = normalizeCustomAgentName(name);
    if (normalized === undefined) return false;
    const deleted = await updateVersioned(this.#versioned, this.#key(normalized), (current) =>
      current === null ? undefined : { value: null, result: true },
    );
    return deleted === true;
  }
}

/**
 * What the setup_agent tool writes through, for one caller: the same store and the same rule as
 * /api/agents (custom agents belong to the deployment, so only an administrator creates or changes
 * one). As upstream: an upsert; the SOUL is set, the description when one is given, the skill list
 * when it is a list. Every refusal is a sentence for the model, never a thrown error.
 */
export function customAgentSetup(store: CustomAgentStore, who: Pick<RunPrincipal, "systemRole" | "isInternal">): AgentSetupPort {
  const administrator = isDeploymentAdministrator(who);
  return {
    async setup(name, fields): Promise<AgentSetupOutcome> {
      if (!administrator) {
        return { ok: false, message: "Only an administrator may create or change custom agents, and this conversation's user is not one; ask an administrator to create the agent." };
      }
      if (normalizeCustomAgentName(name) === undefined) {
        return { ok: false, message: `${JSON.stringify(name)} is not a valid agent name; use 1 to ${CUSTOM_AGENT_NAME_MAX_LENGTH} letters, digits or hyphens.` };
      }
      try {
        const written = await store.upsert(name, {
          soul: fields.soul,
          ...(fields.description.trim() !== "" ? { description: fields.description } : {}),
          ...(Array.isArray(fields.skills) ? { skills: [...fields.skills] } : {}),
        });
        if (!written) return { ok: false, message: `${JSON.stringify(name)} is not a valid agent name.` };
        return { ok: true, name: written.agent.name, created: written.created };
      } catch (error) {
        if (error instanceof CustomAgentStoreError) return { ok: false, message: error.message };
        throw error;
      }
    },
  };
}
