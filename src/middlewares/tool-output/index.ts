// The tool-output family: what the rest of the code base uses of it.
export * from "./json.ts";
export * from "./synopsis.ts";
export * from "./text.ts";
export * from "./tool-output-budget.ts";
export * from "./xml.ts";
