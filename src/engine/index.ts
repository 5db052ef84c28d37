export * from "./types.ts";
export * from "./agent.ts";
export { RunScope } from "./run-scope.ts";
export type { AgentServices } from "./services.ts";
