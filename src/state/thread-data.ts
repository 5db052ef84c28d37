import { VIRTUAL_DIRS } from "../core/path.ts";
import type { ThreadDataState } from "./types.ts";

/**
 * The thread's user-data folders as state records them: the virtual paths every sandbox serves
 * (`/mnt/user-data/...`). State is what GET /threads/{id}/state answers, so a host folder (the
 * storage base, a home directory) never enters it; each sandbox maps the virtual paths to its own
 * storage for the run's user and thread (the local one to `<root>/users/<user>/threads/<thread>`).
 */
export function threadDataPaths(): ThreadDataState {
  return { workspace_path: VIRTUAL_DIRS.workspace, uploads_path: VIRTUAL_DIRS.uploads, outputs_path: VIRTUAL_DIRS.outputs };
}
