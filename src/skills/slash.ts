/*
 * The `/skill-name task` grammar. It is shared with DeerFlow's frontend display parser, so the
 * name alphabet and the reserved composer commands must stay exactly as they are there.
 */

/** Composer control commands that own the leading slash; they never activate a skill. */
export const RESERVED_SLASH_SKILL_NAMES: ReadonlySet<string> = new Set([
  "bootstrap",
  "goal",
  "help",
  "memory",
  "models",
  "new",
  "status",
]);

const SLASH_SKILL = /^\/([a-z0-9]+(?:-[a-z0-9]+)*)(?:\s+|$)/;

export interface SlashSkillReference {
  readonly name: string;
  /** The task text after the command, leading whitespace removed. */
  readonly remainingText: string;
}

/** The skill named at the very start of `text`, or null (not a slash command, or a reserved one). */
export function parseSlashSkillReference(text: string): SlashSkillReference | null {
  const match = SLASH_SKILL.exec(text);
  if (!match) return null;
  const name = match[1]!;
  if (RESERVED_SLASH_SKILL_NAMES.has(name)) return null;
  return { name, remainingText: text.slice(match[0].length).trimStart() };
}
