import type { AgentTool } from "../engine/types.ts";

export const ASK_CLARIFICATION_TOOL_NAME = "ask_clarification";

export const CLARIFICATION_TYPES = Object.freeze([
  "missing_info",
  "ambiguous_requirement",
  "approach_choice",
  "risk_confirmation",
  "suggestion",
] as const);
export type ClarificationType = (typeof CLARIFICATION_TYPES)[number];

export const FORM_FIELD_TYPE_VALUES = Object.freeze(["text", "textarea", "number", "select", "multi_select", "checkbox", "date"] as const);
export type FormFieldType = (typeof FORM_FIELD_TYPE_VALUES)[number];

/** What the tool body answers if it ever runs, which only happens without ClarificationMiddleware. */
export const ASK_CLARIFICATION_UNHANDLED_TEXT = "Clarification request processed by middleware";

const DESCRIPTION = `Ask the user a question when you cannot continue well without their input. The run stops after this call and resumes when the user answers.

Use it when:
- information you need is missing (a path, a URL, a value, a requirement);
- the request can reasonably be read in more than one way;
- several approaches are valid and the user's preference matters;
- you are about to do something risky or destructive (deleting, overwriting, touching production): always confirm first;
- you want to propose something and need the user's approval.

Pick the shape of the question:
- one open question: only \`question\` (the user types an answer);
- choose exactly one: \`options\`;
- choose several: one \`fields\` entry of type \`multi_select\`;
- several values at once: \`fields\`, rendered as one form. Prefer one form over asking for values one by one.

Ask one clarification at a time (a form counts as one). Be specific. If a skill gives you a field template, pass it through \`fields\` unchanged. Do not call other tools in the same turn: they are dropped until the user answers.`;

const FIELDS_DESCRIPTION =
  "Form fields that collect several values in one card; takes precedence over `options`. Each field: `name` (unique id, required; " +
  "avoid JavaScript built-in names such as `constructor` or `toString`), `label` (shown text, defaults to the name), `type` " +
  "(text, textarea, number, select, multi_select, checkbox, date; default text), `required` (default false), `options` " +
  "(needed by select and multi_select) and `placeholder`. A checkbox is a yes/no value that defaults to no; mark a checkbox " +
  "`required` only when the user must agree to continue. Limits: 16 fields, 24 options per field, 200 characters per " +
  "name, label, option or placeholder; a form over a limit is shown as a plain question instead.";

/**
 * The `ask_clarification` tool. ClarificationMiddleware intercepts every call before the body runs,
 * so the body is only a marker; the schema is what the model sees.
 */
export function createAskClarificationTool(): AgentTool {
  return {
    name: ASK_CLARIFICATION_TOOL_NAME,
    description: DESCRIPTION,
    schema: {
      type: "object",
      properties: {
        question: { type: "string", description: "The question to ask the user. Be specific and clear." },
        clarification_type: {
          type: "string",
          enum: [...CLARIFICATION_TYPES],
          description: "Why you are asking: missing_info, ambiguous_requirement, approach_choice, risk_confirmation or suggestion.",
        },
        context: { type: "string", description: "Optional background: why you need the answer." },
        options: {
          type: "array",
          items: { type: "string" },
          description: "Optional choices for the user to pick one from (approach_choice, suggestion).",
        },
        fields: {
          type: "array",
          description: FIELDS_DESCRIPTION,
          items: {
            type: "object",
            properties: {
              name: { type: "string" },
              label: { type: "string" },
              type: { type: "string", enum: [...FORM_FIELD_TYPE_VALUES] },
              required: { type: "boolean" },
              options: { type: "array", items: { type: "string" } },
              placeholder: { type: "string" },
            },
            required: ["name"],
          },
        },
      },
      required: ["question", "clarification_type"],
    },
    metadata: { source: "builtin" },
    async invoke() {
      return ASK_CLARIFICATION_UNHANDLED_TEXT;
    },
  };
}
