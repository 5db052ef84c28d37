// The skills family: what the rest of the code base uses of it.
export * from "./chain-binding.ts";
export * from "./skill-activation.ts";
export * from "./skill-middlewares.ts";
export * from "./skill-tool-policy.ts";
