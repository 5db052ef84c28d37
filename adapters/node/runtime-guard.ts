// The first import of deerflow-edge/node: refuse to load on another runtime (see ../shared/runtime-guard.ts).
import { requireRuntime } from "../shared/runtime-guard.ts";

requireRuntime("node");
