// Deno without --allow-sys: where langsmith looks for its profile file, decided before it asks.
//
// @langchain/core wraps every runnable call in a langsmith RunTree, tracing on or off, and the
// first RunTree builds a langsmith Client, whose constructor looks for a profile file at
// os.homedir()/.langsmith/config.json unless LANGSMITH_CONFIG_FILE names one. Deno allows
// os.homedir() only under --allow-sys=homedir, which a Deno Deploy-style permission set
// (--allow-net --allow-env --allow-read) lacks: every run failed with NotCapable. Where that
// permission is missing and the variable is unset, it is set to the file langsmith would have
// read (under $HOME, which --allow-env lets us read), so the profile still works and nothing asks
// for the home directory. With --allow-sys=homedir, or the variable set by the user, nothing changes.

declare const Deno: {
  permissions: { querySync(descriptor: { name: "sys"; kind: "homedir" } | { name: "env"; variable: string }): { state: string } };
  env: { get(name: string): string | undefined; set(name: string, value: string): void };
  build: { os: string };
};

const VARIABLE = "LANGSMITH_CONFIG_FILE";

function granted(descriptor: Parameters<typeof Deno.permissions.querySync>[0]): boolean {
  try {
    return Deno.permissions.querySync(descriptor).state === "granted";
  } catch {
    return false;
  }
}

export function pointLangsmithAtItsProfileFile(): void {
  if (granted({ name: "sys", kind: "homedir" })) return;
  if (!granted({ name: "env", variable: VARIABLE }) || Deno.env.get(VARIABLE) !== undefined) return;
  const windows = Deno.build.os === "windows";
  const home = granted({ name: "env", variable: windows ? "USERPROFILE" : "HOME" }) ? Deno.env.get(windows ? "USERPROFILE" : "HOME") : undefined;
  const separator = windows ? "\\" : "/";
  // No home directory (a Deno Deploy isolate): no profile file either; an absolute path that is
  // looked up and not found, as langsmith does for a missing file.
  const file = home ? `${home.replace(/[\\/]+$/, "")}${separator}.langsmith${separator}config.json` : `${separator}.langsmith${separator}config.json`;
  try {
    Deno.env.set(VARIABLE, file);
  } catch {
    // Env writes refused: langsmith will ask for the home directory, as before.
  }
}

pointLangsmithAtItsProfileFile();
