import { ToolMessage } from "@langchain/core/messages";
import * as v from "valibot";
import { describeIssue } from "../config/issues.ts";
import type { AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";

/*
 * setup_agent: the tool of DeerFlow's agent-creation chat (the UI's "new agent" page, a run with
 * `context.is_bootstrap` and the chosen `context.agent_name`). The model calls it once the SOUL is
 * agreed; it creates the custom agent of the run's agent_name, or updates it when it exists
 * (upstream's upsert). Where agents are kept and who may write them is the port's business, so
 * this layer knows no store.
 */

export const SETUP_AGENT_TOOL_NAME = "setup_agent";

/** What a setup_agent call sets, validated. */
export interface AgentSetupFields {
  readonly soul: string;
  readonly description: string;
  /** A list: the skills the agent may use ([]: none). Absent or null: left as it is (every enabled skill for a new agent), as upstream. */
  readonly skills?: readonly string[] | null;
}

/** The outcome the model reads: the agent's stored name, or why nothing was written. */
export type AgentSetupOutcome = { readonly ok: true; readonly name: string; readonly created: boolean } | { readonly ok: false; readonly message: string };

/** Writes the agent named by the run (the runtime's custom-agent store, with its write rule). */
export interface AgentSetupPort {
  setup(name: string, fields: AgentSetupFields): Promise<AgentSetupOutcome>;
}

const ArgsSchema = v.object({
  soul: v.pipe(
    v.string("expected the SOUL.md text"),
    v.check((soul) => soul.trim() !== "", "the SOUL is empty; refusing to create an agent with an empty SOUL.md"),
  ),
  description: v.optional(v.nullable(v.string("expected a one-line description")), ""),
  skills: v.optional(v.nullable(v.array(v.pipe(v.string("expected a skill name"), v.nonEmpty("expected a skill name"))))),
});

/** `soul: required key is missing; ...`, the way a config error names its key. */
function issuesText(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .map((issue) => {
      const { path, message } = describeIssue(issue, ArgsSchema, SETUP_AGENT_TOOL_NAME);
      return path === "" ? message : `${path}: ${message}`;
    })
    .join("; ");
}

/** The agent name the run was started for, or undefined when it named none. */
function runAgentName(context: Readonly<Record<string, unknown>>): string | undefined {
  const name = context.agent_name;
  return typeof name === "string" && name.trim() !== "" ? name.trim() : undefined;
}

function answer(context: ToolContext, content: string, ok: boolean): ToolMessage {
  return new ToolMessage({
    content,
    tool_call_id: context.toolCall.id ?? "",
    name: SETUP_AGENT_TOOL_NAME,
    ...(ok ? {} : { status: "error" as const }),
  });
}

export function createSetupAgentTool(port: AgentSetupPort): AgentTool {
  return {
    name: SETUP_AGENT_TOOL_NAME,
    description:
      "Save the custom agent being designed in this conversation: its SOUL.md (personality, behaviour, guardrails) and a " +
      "one-line description. Call it once the user has confirmed the SOUL or asked to save; calling it again updates the agent.",
    schema: {
      type: "object",
      properties: {
        soul: { type: "string", description: "Full SOUL.md content defining the agent's personality and behavior." },
        description: { type: "string", description: "One-line description of what the agent does." },
        skills: {
          type: ["array", "null"],
          items: { type: "string" },
          description: "Optional list of skill names this agent should use. Null or absent: every enabled skill; an empty list: no skills.",
        },
      },
      required: ["soul", "description"],
    },
    async invoke(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput> {
      const parsed = v.safeParse(ArgsSchema, args);
      if (!parsed.success) return answer(context, `Error: ${issuesText(parsed.issues)}. Nothing was saved; call setup_agent again with valid arguments.`, false);
      const name = runAgentName(context.runtime.context);
      if (name === undefined) {
        return answer(context, "Error: this run names no agent (context.agent_name), so there is no agent to set up. Nothing was saved.", false);
      }
      const { soul, description, skills } = parsed.output;
      const outcome = await port.setup(name, { soul, description: description ?? "", ...(skills === undefined ? {} : { skills }) });
      if (!outcome.ok) return answer(context, `Error: ${outcome.message} Nothing was saved.`, false);
      return answer(context, `Agent '${outcome.name}' ${outcome.created ? "created" : "updated"} successfully!`, true);
    },
  };
}
