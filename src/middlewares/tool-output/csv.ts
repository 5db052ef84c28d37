// The CSV reader the table detector samples with: Python's csv.reader, rule for rule.

import { DeerflowError } from "../../core/errors.ts";

// Python's csv module refuses longer fields (field_size_limit); such a table is "not a table".
const CSV_FIELD_LIMIT = 131_072;

export class CsvError extends DeerflowError {
  constructor(message: string) {
    super("csv_syntax_error", message);
    this.name = "CsvError";
  }
}

/**
 * Rows as Python's csv.reader (excel dialect, non-strict) reads `text`: `"` quotes with doubled
 * quotes inside, quoted fields may span lines, a stray quote inside an unquoted field is literal,
 * a blank line is an empty row.
 */
export function readCsv(text: string, delimiter: string): string[][] {
  const rows: string[][] = [];
  let fields: string[] = [];
  let field = "";
  type State = "startRecord" | "startField" | "inField" | "inQuoted" | "quoteInQuoted" | "eatNewline";
  let state: State = "startRecord";
  const save = () => {
    if (field.length > CSV_FIELD_LIMIT) throw new CsvError("field larger than field limit");
    fields.push(field);
    field = "";
  };
  const add = (c: string) => {
    field += c;
    if (field.length > CSV_FIELD_LIMIT) throw new CsvError("field larger than field limit");
  };
  const EOL = null;
  const step = (c: string | null): void => {
    switch (state) {
      case "startRecord":
        if (c === EOL) return;
        if (c === "\n" || c === "\r") {
          state = "eatNewline";
          return;
        }
        state = "startField";
        step(c);
        return;
      case "startField":
        if (c === "\n" || c === "\r" || c === EOL) {
          save();
          state = c === EOL ? "startRecord" : "eatNewline";
        } else if (c === '"') state = "inQuoted";
        else if (c === delimiter) save();
        else {
          add(c);
          state = "inField";
        }
        return;
      case "inField":
        if (c === "\n" || c === "\r" || c === EOL) {
          save();
          state = c === EOL ? "startRecord" : "eatNewline";
        } else if (c === delimiter) {
          save();
          state = "startField";
        } else add(c);
        return;
      case "inQuoted":
        if (c === EOL) return;
        if (c === '"') state = "quoteInQuoted";
        else add(c);
        return;
      case "quoteInQuoted":
        if (c === '"') {
          add('"');
          state = "inQuoted";
        } else if (c === delimiter) {
          save();
          state = "startField";
        } else if (c === "\n" || c === "\r" || c === EOL) {
          save();
          state = c === EOL ? "startRecord" : "eatNewline";
        } else {
          add(c);
          state = "inField";
        }
        return;
      case "eatNewline":
        if (c === "\n" || c === "\r") return;
        if (c === EOL) {
          state = "startRecord";
          return;
        }
        throw new CsvError("new-line character seen in unquoted field");
    }
  };

  const lines = text.split("\n");
  for (const [index, line] of lines.entries()) {
    const last = index === lines.length - 1;
    if (last && line === "") break;
    for (const c of line) step(c);
    if (!last) step("\n");
    step(EOL);
    if (state === "startRecord") {
      rows.push(fields);
      fields = [];
    }
  }
  // End of input inside a record: the non-strict reader keeps what it has.
  // `state` is written inside step(), which the compiler's narrowing cannot see.
  if ((state as State) === "inQuoted") {
    save();
    rows.push(fields);
  }
  return rows;
}
