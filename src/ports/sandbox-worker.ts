/**
 * A dedicated thread for the virtual sandbox's interpreter. just-bash runs a command without ever
 * yielding a macrotask (`while true; do :; done` awaits only resolved promises), so on the
 * gateway's thread one runaway command would stall every request. Behind this port it runs in a
 * worker the main thread talks to by messages, and a command past its timeout is stopped by
 * terminating the worker. Node implements it with worker_threads, Deno and Bun with Web Workers.
 */
export interface SandboxWorkerPort {
  /**
   * Starts one worker running the virtual sandbox host (src/sandbox/virtual-host.ts
   * `serveVirtualSandboxHost`). Messages are structured-cloned both ways.
   */
  start(): SandboxWorker;
}

export interface SandboxWorker {
  postMessage(message: unknown): void;
  /** Every message the worker posts, in order. */
  onMessage(listener: (message: unknown) => void): void;
  /** Called once if the worker dies on its own (an uncaught error, a failed start). */
  onFailure(listener: (error: Error) => void): void;
  /** Stops the worker at once, even in the middle of a command that never yields. */
  terminate(): void;
  /**
   * Whether the worker alone keeps the process running: the sandbox says yes while a call waits
   * on it and no when idle, so an acquired sandbox nobody closes does not stop the process from
   * ending. Optional: a runtime whose workers cannot be unreferenced leaves it out.
   */
  keepAlive?(yes: boolean): void;
}

/** The worker's side of the channel, as the runtime's worker entry hands it to the host. */
export interface SandboxWorkerChannel {
  postMessage(message: unknown): void;
  onMessage(listener: (message: unknown) => void): void;
  /**
   * Collects the worker's own garbage now; the host calls it once it has had no command for a
   * while. A worker's heap is its own: the gateway thread's collection never reaches it, and an
   * idle worker allocates nothing that would start one (on Bun an idle worker kept about 15 MB
   * after a burst of commands). Optional: absent where the runtime offers no way to ask.
   */
  reclaimMemory?(): void;
}
