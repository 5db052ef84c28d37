// Type-checked (tsc --strict --noEmit, nodenext) against the installed tarball's .d.ts files by
// test/package/installed.test.ts: the entries a TypeScript user imports, with their real types.
import { createKeyValue, createNodeEnv, serveNode } from "deerflow-edge/node";
import { createDeerFlowClient, createGateway, validateLeadConfig, type LeadConfig, type Gateway } from "deerflow-edge";
import { canonicalJson, Placement } from "deerflow-edge/extension-api";
import type { serveDeno } from "deerflow-edge/deno";
import type { serveBun } from "deerflow-edge/bun";

const config: LeadConfig = validateLeadConfig({}, "consumer.ts");
const client = await createDeerFlowClient({ config });
const answer = await client.chat("hi");
const text: string = answer.text;
await client.close();

const gateway: Gateway = await createGateway({ config, storage: createKeyValue(config.storage), env: createNodeEnv() });
const server = await serveNode(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
const url: string = server.url;
await server.close();
await gateway.shutdown();

const placement: string = Placement.MODEL_LOGICAL;
const servers: [typeof serveDeno, typeof serveBun] | undefined = undefined;
console.log(text, url, placement, canonicalJson({ a: 1 }), servers);
