// The first import of deerflow-edge/deno: refuse to load on another runtime (see ../shared/runtime-guard.ts).
import { requireRuntime } from "../shared/runtime-guard.ts";

requireRuntime("deno");
