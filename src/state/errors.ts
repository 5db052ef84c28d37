import { DeerflowError } from "../core/errors.ts";

/**
 * Codes a state update can be rejected with. The `(string & {})` arm keeps the union open so a
 * later channel can add a code without breaking callers that switch on the known ones.
 */
export type StateUpdateErrorCode =
  | "unknown_channel"
  | "invalid_update"
  | "unknown_message_id"
  | "invalid_messages_update"
  | (string & {});

/** A state update that no channel can fold: unknown key, wrong shape, or a message removal that misses. */
export class StateUpdateError extends DeerflowError {
  declare readonly code: StateUpdateErrorCode;
  /** The channel the update was aimed at, when there is one. */
  readonly channel: string | undefined;

  constructor(code: StateUpdateErrorCode, message: string, options?: { channel?: string; cause?: unknown }) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "StateUpdateError";
    this.channel = options?.channel;
  }
}

/**
 * Two writers disagree about which sandbox the thread owns. Picking one silently would leak the
 * other sandbox and mix two workspaces in one thread, so the run fails instead.
 */
export class StateConflictError extends DeerflowError {
  declare readonly code: "sandbox_conflict";
  readonly channel = "sandbox" as const;
  readonly existingId: string;
  readonly incomingId: string;

  constructor(existingId: string, incomingId: string) {
    super(
      "sandbox_conflict",
      `Conflicting sandbox state updates: the thread holds sandbox ${JSON.stringify(existingId)} but an update ` +
        `set ${JSON.stringify(incomingId)}. A thread uses one sandbox for its whole life; release the old ` +
        `sandbox and start a new thread instead of switching sandboxes inside one.`,
    );
    this.name = "StateConflictError";
    this.existingId = existingId;
    this.incomingId = incomingId;
  }
}
