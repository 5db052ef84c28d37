// just-bash's defense-in-depth layer reports, on every command, two process properties Deno does
// not let it patch; the sandbox still works and has no host access, so those two notes stay out
// of the terminal and the platform's logs. Everything else console.debug prints still goes through.
const debug = console.debug.bind(console);
console.debug = (...args: unknown[]) => {
  if (typeof args[0] === "string" && args[0].startsWith("[DefenseInDepthBox] Could not")) return;
  debug(...args);
};
