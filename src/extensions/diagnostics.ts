/** One thing an extension did wrong, attributed to the extension (its `use` string) so an operator can find it. */
export interface ExtensionDiagnostic {
  readonly level: "error" | "warning" | "info";
  /** The extension the problem belongs to. */
  readonly source: string;
  readonly message: string;
  /** The graph name of the isolated member that reported it, when a wrapper did. */
  readonly middleware?: string;
}

export type DiagnosticSink = (diagnostic: ExtensionDiagnostic) => void;
