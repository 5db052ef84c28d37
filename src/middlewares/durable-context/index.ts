// The durable-context family: what the rest of the code base uses of it.
export * from "./durable-context.ts";
export * from "./ledger.ts";
export * from "./skills.ts";
