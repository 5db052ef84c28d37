// Every entry installs AsyncLocalStorage before anything else (toolchain pitfall P3/P3b); the
// test run is an entry too, so behaviour never depends on which module happened to load first.
import "../adapters/shared/als.ts";
