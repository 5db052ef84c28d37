import type { BindToolsInput, ToolChoice } from "@langchain/core/language_models/chat_models";
import { convertToOpenAITool, isLangChainTool } from "@langchain/core/utils/function_calling";
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { ModelError } from "./errors.ts";
import { isRecord } from "../core/guards.ts";

/** A tool as the OpenAI chat-completions API takes it. */
export interface OpenAIFunctionTool {
  type: "function";
  function: {
    name: string;
    description?: string;
    parameters?: Record<string, unknown>;
    strict?: boolean;
  };
}

function invalidTool(detail: string): ModelError {
  return new ModelError(
    `Cannot bind tool: ${detail}; pass {type: "function", function: {name, description, parameters}}, {name, description, schema} or a LangChain tool`,
    { code: "invalid_tool_definition" },
  );
}

/**
 * Accepts an OpenAI function tool, `{name, description, schema}` (JSON schema or zod),
 * `{name, description, parameters}`, or a LangChain tool, and returns the OpenAI wire shape.
 */
export function toOpenAITool(tool: BindToolsInput | OpenAIFunctionTool): OpenAIFunctionTool {
  if (!isRecord(tool)) throw invalidTool(`expected an object, got ${typeof tool}`);
  if (tool.type === "function" && isRecord(tool.function)) {
    if (typeof tool.function.name !== "string" || tool.function.name === "") throw invalidTool("function.name is missing");
    return tool as unknown as OpenAIFunctionTool;
  }
  if (isLangChainTool(tool)) return convertToOpenAITool(tool) as OpenAIFunctionTool;
  if (typeof tool.name !== "string" || tool.name === "") throw invalidTool("name is missing");
  const schema = "schema" in tool ? tool.schema : tool.parameters;
  const parameters = schema === undefined ? { type: "object", properties: {} } : toJsonSchema(schema as never);
  if (!isRecord(parameters)) throw invalidTool(`the schema of "${tool.name}" is not a JSON schema object`);
  const fn: OpenAIFunctionTool["function"] = { name: tool.name, parameters };
  if (typeof tool.description === "string") fn.description = tool.description;
  return { type: "function", function: fn };
}

/** LangChain's tool_choice values in OpenAI's vocabulary ("any" is "required" there). */
export function toOpenAIToolChoice(choice: ToolChoice): unknown {
  if (choice === "any") return "required";
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  if (typeof choice === "string") return { type: "function", function: { name: choice } };
  return choice;
}
