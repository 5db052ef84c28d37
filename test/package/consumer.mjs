// A consumer of the installed deerflow-edge tarball, in plain JavaScript: copied into a fresh
// project by test/package/installed.test.ts and run there by node, deno and bun. It prints one JSON
// line with what a user would check: the demo turn's answer and the streamed run's frames.
const runtime = globalThis.Deno ? "deno" : globalThis.Bun ? "bun" : "node";
const adapter = await import(`deerflow-edge/${runtime}`); // first: installs AsyncLocalStorage
const { createDeerFlowClient, createGateway, validateLeadConfig, createMemoryKeyValue } = await import("deerflow-edge");
const serve = { node: adapter.serveNode, deno: adapter.serveDeno, bun: adapter.serveBun }[runtime];

const client = await createDeerFlowClient();
const answer = await client.chat("Summarize the water cycle");
await client.close();

const gateway = await createGateway({ config: validateLeadConfig({}, "consumer"), storage: createMemoryKeyValue(), listening: { host: "127.0.0.1" } });
const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
const events = [];
let last = "";
try {
  const created = await (await fetch(`${server.url}/api/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json();
  const response = await fetch(`${server.url}/api/threads/${created.thread_id}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ input: { messages: [{ type: "human", content: "Describe the moon" }] }, stream_mode: ["values"] }),
  });
  const text = await response.text();
  for (const block of text.split("\n\n")) {
    const event = /^event: (.+)$/m.exec(block)?.[1];
    const data = /^data: (.+)$/m.exec(block)?.[1];
    if (!event) continue;
    events.push(event);
    if (event === "values") last = String(JSON.parse(data).messages.at(-1).content);
  }
} finally {
  await server.close();
  await gateway.shutdown();
}

let wrongRuntime = "";
try {
  await import(runtime === "node" ? "deerflow-edge/deno" : "deerflow-edge/node");
} catch (error) {
  wrongRuntime = `${error.code}: ${error.message}`;
}

console.log(JSON.stringify({ runtime, answer: { status: answer.status, text: answer.text }, stream: { events, last }, wrongRuntime }));
process.exit(0);
