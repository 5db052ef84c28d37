// Every entry installs AsyncLocalStorage before anything else (docs/toolchain.md, AsyncLocalStorage
// in every entry); the test run is an entry too, so behaviour never depends on which module happened to load first.
import "../adapters/shared/als.ts";
