import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";

/*
 * A cancelled run's stream rejects the moment its signal aborts, while LangGraph's loop is still
 * saving the steps it had finished (each save chained after the one before). What the run
 * lifecycle writes after a cancel (the fallback title, a rollback) must land after those saves:
 * written over a head that is not there yet, it becomes the newest checkpoint and buries the run's
 * input. The gateway hands its agents and its run manager one tracked saver, so the worker can wait
 * for a thread's saves to go quiet first.
 */

type InFlight = Map<string, Set<Promise<unknown>>>;

const tracked = new WeakMap<object, InFlight>();

function threadOf(config: unknown): string | undefined {
  const threadId = (config as { configurable?: { thread_id?: unknown } } | undefined)?.configurable?.thread_id;
  return typeof threadId === "string" ? threadId : undefined;
}

/**
 * The same saver with every `put` and `putWrites` passed through `around` (the write's thread id,
 * and the write itself to call); every other method runs on the saver untouched.
 */
export function wrapSaverWrites<T extends BaseCheckpointSaver>(
  saver: T,
  around: (threadId: string | undefined, write: () => Promise<unknown>) => Promise<unknown>,
): T {
  return new Proxy(saver, {
    get(target, property) {
      if (property === "put" || property === "putWrites") {
        const write = Reflect.get(target, property, target) as (...args: unknown[]) => Promise<unknown>;
        return (config: unknown, ...rest: unknown[]) => around(threadOf(config), () => write.call(target, config, ...rest));
      }
      // The saver's own methods run on the saver itself (it may keep private fields).
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The same saver, with every put and putWrites remembered per thread until it settles. Idempotent. */
export function trackCheckpointWrites<T extends BaseCheckpointSaver>(saver: T): T {
  if (tracked.has(saver)) return saver;
  const inFlight: InFlight = new Map();
  const remember = (threadId: string, write: Promise<unknown>): Promise<unknown> => {
    const writes = inFlight.get(threadId) ?? new Set<Promise<unknown>>();
    inFlight.set(threadId, writes);
    const settled = write.then(
      () => undefined,
      () => undefined,
    );
    writes.add(settled);
    void settled.then(() => {
      writes.delete(settled);
      if (writes.size === 0 && inFlight.get(threadId) === writes) inFlight.delete(threadId);
    });
    return write;
  };
  const proxy = wrapSaverWrites(saver, (threadId, write) => remember(threadId ?? "", write()));
  tracked.set(proxy, inFlight);
  return proxy;
}

/**
 * Resolves once no save of `threadId` is in flight, and none followed within a turn of the event
 * loop (LangGraph issues each save as the one before it settles). Immediate for an untracked saver.
 */
export async function checkpointWritesSettled(saver: BaseCheckpointSaver, threadId: string): Promise<void> {
  const inFlight = tracked.get(saver);
  if (inFlight === undefined) return;
  for (;;) {
    const writes = inFlight.get(threadId);
    if (writes !== undefined && writes.size > 0) {
      await Promise.all([...writes]);
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, 0));
    if ((inFlight.get(threadId)?.size ?? 0) === 0) return;
  }
}

/**
 * Resolves once no save of any thread is in flight, or after `timeoutMs` (a run abandoned by the
 * shutdown drain may still be stepping): the last step before the storage under them closes.
 */
export async function allCheckpointWritesSettled(saver: BaseCheckpointSaver, timeoutMs = 2000): Promise<void> {
  const inFlight = tracked.get(saver);
  if (inFlight === undefined || inFlight.size === 0) return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
  const settled = (async () => {
    while (inFlight.size > 0) {
      for (const threadId of [...inFlight.keys()]) await checkpointWritesSettled(saver, threadId);
    }
  })();
  try {
    await Promise.race([settled, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
