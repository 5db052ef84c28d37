import {
  HEREDOC_HEADER_SOURCE,
  PY_SPACE_CLASS_BODY,
  ShlexError,
  codePointLength,
  collapseWhitespace,
  pyStrip,
  shlexSplit,
  splitCompoundCommand,
} from "./split.ts";

/*
 * Shell-command classification for SandboxAudit. It is defence in depth and an audit trail, not a
 * security boundary: the sandbox is the isolation boundary. The rules are regular expressions
 * written against Python's `re`; the building blocks below give `\s`, `\S`, `\w`, `\d`, `\b` and
 * `.` their Python meaning so each rule matches exactly what it matches upstream.
 */

export type CommandVerdict = "block" | "warn" | "pass";

export interface CommandClassification {
  readonly verdict: CommandVerdict;
  /** Why: the input check that failed, "security violation detected", or the medium-risk note. */
  readonly reason?: string;
}

export const MAX_COMMAND_LENGTH = 10_000;
export const SECURITY_VIOLATION_REASON = "security violation detected";
export const MEDIUM_RISK_REASON = "medium-risk command that may modify the runtime environment";

const S = `[${PY_SPACE_CLASS_BODY}]`;
const NS = `[^${PY_SPACE_CLASS_BODY}]`;
const W = String.raw`[\p{L}\p{N}_]`;
const D = String.raw`\p{Nd}`;
/** Python's `.`: anything but a newline (JS's `.` also refuses \r, U+2028 and U+2029). */
const ANY = String.raw`[^\n]`;
/** Python's Unicode `\b`; JS's `\b` only knows ASCII word characters. */
const B = `(?:(?<=${W})(?!${W})|(?<!${W})(?=${W}))`;

/*
 * Executables whose output is dangerous to execute. The trailing boundary keeps names that merely
 * start with one (`shellcheck`, `shasum`, `pythonic-tool`) out.
 */
const RISKY_SUBSTITUTION_EXECUTABLES = `(?:curl|wget|bash|sh|python[${D}.]*|ruby|perl|base64)${B}`;

/*
 * One opener for all three substitution spellings, `$(`, `<(` and the backtick, so no rule can be
 * written for one spelling and evaded with another (`eval \`curl u\`` next to `eval $(curl u)`).
 */
const RISKY_SUBSTITUTION = String.raw`(?:[$<]\(${S}*|` + "`" + `${S}*)${RISKY_SUBSTITUTION_EXECUTABLES}`;

/*
 * Interpreters that execute a code string handed to a flag: -c (shells, python), -e (perl, ruby,
 * node), -p (perl, node), -r (php). Whatever the flag receives runs, so these are position-blind on
 * purpose (`xargs sh -c "$(curl u)"` runs as an argument of something else). The leading-flag
 * repetition is bounded so the alternation cannot backtrack on long input.
 */
const CODE_STRING_INTERPRETERS = `(?:(?:ba|da|k|z)?sh|python[${D}.]*|perl|ruby|node|php)`;
const LEADING_FLAGS = `(?:-${W}+${S}+){0,4}`;

interface Rule {
  readonly id: string;
  readonly source: string;
}

const HIGH_RISK_RULES: readonly Rule[] = [
  { id: "recursive_rm_root", source: `rm${S}+-${NS}*r${NS}*${S}+(?:/\\*?|~/?\\*?|/home${B}|/root${B})${S}*$` },
  { id: "dd_if", source: `dd${S}+if=` },
  { id: "mkfs", source: "mkfs" },
  { id: "read_shadow", source: `cat${S}+/etc/shadow` },
  { id: "write_etc", source: `>+${S}*/etc/` },
  { id: "pipe_to_shell", source: String.raw`\|${S}*(?:ba)?sh${B}` },
  { id: "eval_source_substitution", source: `${B}(?:eval|source)${S}+["']?${RISKY_SUBSTITUTION}` },
  {
    id: "code_string_substitution",
    source: `${B}${CODE_STRING_INTERPRETERS}${S}+${LEADING_FLAGS}-[cepr]${S}+["']?${RISKY_SUBSTITUTION}`,
  },
  { id: "here_string_substitution", source: `${B}${CODE_STRING_INTERPRETERS}${S}+${LEADING_FLAGS}<<<${S}*["']?${RISKY_SUBSTITUTION}` },
  { id: "base64_decode_pipe", source: `base64${S}+${ANY}*-d${ANY}*\\|` },
  { id: "write_system_binaries", source: `>+${S}*(?:/usr/bin/|/bin/|/sbin/)` },
  { id: "write_shell_startup", source: `>+${S}*~/?\\.(?:bashrc|profile|zshrc|bash_profile)` },
  { id: "proc_environ", source: "/proc/[^/]+/environ" },
  { id: "dynamic_linker_hijack", source: `${B}(?:LD_PRELOAD|LD_LIBRARY_PATH)${S}*=` },
  { id: "dev_tcp", source: "/dev/tcp/" },
  // Upstream spells the name `\S+`; one character is the same test (any longer name ends in one)
  // without rescanning every name on long input.
  { id: "fork_bomb_function", source: `${NS}\\(\\)${S}*\\{[^}]*\\|${S}*${NS}+${S}*&` },
  { id: "fork_bomb_loop", source: `while${S}+true${ANY}*&${S}*done` },
];

/*
 * A command position is not always the first character: leading assignments and exec wrappers
 * keep what follows in command position (`FOO=1 $(curl u)`, `env FOO=1 $(curl u)`). The assignment
 * branch needs whitespace before the substitution, which is what keeps `x=$(curl u)` (output
 * capture, issue #4611) in value position. Bounded for the same backtracking reason as above.
 */
const COMMAND_POSITION_PREFIX = `(?:(?:env|command|builtin|exec|nohup|time|sudo|doas)${S}+|${W}+=${NS}*${S}+){0,8}`;

/** Anchored at the start of one sub-command: only meaningful for a single statement. */
const COMMAND_POSITION_RULES: readonly Rule[] = [
  { id: "command_position_dollar_paren", source: `^${COMMAND_POSITION_PREFIX}["']?\\$\\(${S}*${RISKY_SUBSTITUTION_EXECUTABLES}` },
  { id: "command_position_backtick", source: `^${COMMAND_POSITION_PREFIX}["']?` + "`" + `${S}*${RISKY_SUBSTITUTION_EXECUTABLES}` },
];

const MEDIUM_RISK_RULES: readonly Rule[] = [
  { id: "chmod_777", source: `chmod${S}+777` },
  { id: "pip_install", source: `pip3?${S}+install` },
  { id: "apt_install", source: `apt(?:-get)?${S}+install` },
  // A no-op as root in a container, but the model should know it asked for privileges.
  { id: "privilege_escalation", source: `${B}(?:sudo|su)${B}` },
  // PATH changes are a long attack chain: worth a warning, not a block.
  { id: "path_assignment", source: `${B}PATH${S}*=` },
];

const compile = (rules: readonly Rule[]): readonly RegExp[] => rules.map((rule) => new RegExp(rule.source, "u"));
const HIGH_RISK_PATTERNS = compile(HIGH_RISK_RULES);
const COMMAND_POSITION_PATTERNS = compile(COMMAND_POSITION_RULES);
const MEDIUM_RISK_PATTERNS = compile(MEDIUM_RISK_RULES);

/** Every rule's source, for the release-policy digest: a changed rule is a changed policy. */
export const SANDBOX_AUDIT_RULE_SOURCES: Readonly<Record<string, readonly string[]>> = Object.freeze({
  high_risk: HIGH_RISK_RULES.map((rule) => rule.source),
  command_position: COMMAND_POSITION_RULES.map((rule) => rule.source),
  medium_risk: MEDIUM_RISK_RULES.map((rule) => rule.source),
  heredoc_header: [HEREDOC_HEADER_SOURCE],
});

/** The reason a command is refused before any rule looks at it, or null when it is acceptable. */
export function validateCommand(command: string): string | null {
  if (pyStrip(command) === "") return "empty command";
  if (codePointLength(command) > MAX_COMMAND_LENGTH) return "command too long";
  if (command.includes("\u0000")) return "null byte detected";
  return null;
}

function matchesHighRisk(candidate: string): boolean {
  if (HIGH_RISK_PATTERNS.some((pattern) => pattern.test(candidate))) return true;
  return COMMAND_POSITION_PATTERNS.some((pattern) => pattern.test(candidate));
}

function classifySingleCommand(command: string): CommandVerdict {
  const normalized = collapseWhitespace(command);
  if (matchesHighRisk(normalized)) return "block";
  // Quoting can hide a rule from the raw text (`cat "/etc/shadow"`); reading the words the way the
  // shell will undoes it.
  try {
    if (matchesHighRisk(shlexSplit(command).join(" "))) return "block";
  } catch (error) {
    // Heredocs and other multi-line forms can be valid shell that a lexer cannot read; the raw
    // text was already checked above.
    if (!(error instanceof ShlexError)) throw error;
  }
  return MEDIUM_RISK_PATTERNS.some((pattern) => pattern.test(normalized)) ? "warn" : "pass";
}

/**
 * The verdict on a command without the input checks: first the whole command against the rules
 * that need context across statements (`| sh`, `base64 -d | ...`, fork bombs, eval and
 * code-string substitutions), then every sub-command (pipes split too, since the word after a
 * pipe is a command position); the worst verdict wins.
 */
export function classifyCommandRules(command: string): CommandVerdict {
  const normalized = collapseWhitespace(command);
  if (HIGH_RISK_PATTERNS.some((pattern) => pattern.test(normalized))) return "block";
  let worst: CommandVerdict = "pass";
  for (const sub of splitCompoundCommand(command, { splitPipes: true })) {
    const verdict = classifySingleCommand(sub);
    if (verdict === "block") return "block";
    if (verdict === "warn") worst = "warn";
  }
  return worst;
}

/**
 * Classifies one shell command: "block" (must not run), "warn" (runs, the model is told it is
 * medium risk) or "pass". Empty, over-long (more than 10,000 code points) and NUL-carrying
 * commands are blocked with the input check as the reason.
 */
export function classifyCommand(command: string): CommandClassification {
  const rejected = validateCommand(command);
  if (rejected !== null) return { verdict: "block", reason: rejected };
  const verdict = classifyCommandRules(command);
  if (verdict === "block") return { verdict, reason: SECURITY_VIOLATION_REASON };
  if (verdict === "warn") return { verdict, reason: MEDIUM_RISK_REASON };
  return { verdict };
}
