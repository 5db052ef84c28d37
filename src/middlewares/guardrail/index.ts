// The guardrail family: what the rest of the code base uses of it.
export * from "./guardrail.ts";
