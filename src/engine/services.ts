import type { KeyValue } from "../ports/key-value.ts";
import type { Clock, Env } from "../ports/runtime-ports.ts";
import type { SandboxProvider } from "../ports/sandbox.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";

/** Ports handed to an agent at assembly; every hook and tool reaches them through runtime.services. */
export interface AgentServices {
  readonly sandbox?: SandboxProvider;
  readonly storage?: KeyValue;
  /** Compare-and-set over `storage`'s keys (memory records); default: the in-process one over `storage`. */
  readonly versioned?: VersionedKeyValue;
  readonly clock: Clock;
  readonly env?: Env;
  /** Base directory of per-user, per-thread data, relative to the storage root (default `.deer-flow`). */
  readonly baseDir?: string;
}
