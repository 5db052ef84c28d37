/**
 * One macrotask turn, without a timer's minimum delay. Work that never waits on I/O (the demo
 * model, a run over memory storage) would otherwise hold the event loop to its end, and nothing it
 * streamed would reach a socket before then. MessageChannel exists on Node, Deno, Bun and in
 * browsers.
 */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}
