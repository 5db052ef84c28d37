import { lstat, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { DeploymentFilesError, type DeploymentFile, type DeploymentFiles } from "../../src/ports/deployment-files.ts";

/**
 * A deployment folder on disk (the skills folder). A new folder is written in full to a hidden
 * staging folder beside its destination, then renamed into place: on one file system a rename is
 * atomic, so a reader (the skills registry walks the folder on every run) sees the whole folder or
 * none of it, and a failed write leaves nothing behind. The registry ignores dot folders, so a
 * staging folder is never read as a skill.
 */
export function createFsDeploymentFiles(rootDir: string, description = `the folder ${rootDir}`): DeploymentFiles {
  const root = resolve(rootDir);
  const inside = (relative: string): string => {
    const segments = relative.split("/");
    if (relative === "" || segments.some((s) => s === "" || s === "." || s === ".." || s.includes("\\") || s.includes("\0"))) {
      throw new DeploymentFilesError("deployment_files_invalid_path", `${JSON.stringify(relative)} is not a relative path inside ${description}.`);
    }
    const path = join(root, ...segments);
    if (!path.startsWith(root + sep)) {
      throw new DeploymentFilesError("deployment_files_invalid_path", `${JSON.stringify(relative)} is not a relative path inside ${description}.`);
    }
    return path;
  };
  const exists = async (path: string): Promise<boolean> => {
    try {
      await lstat(path);
      return true;
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT") return false;
      throw error;
    }
  };

  return {
    description,
    async createFolder(folder: string, files: readonly DeploymentFile[]): Promise<boolean> {
      const target = inside(folder);
      for (const file of files) inside(`${folder}/${file.path}`);
      if (await exists(target)) return false;
      const parent = dirname(target);
      const staging = join(parent, `.staging-${crypto.randomUUID()}`);
      try {
        await mkdir(staging, { recursive: true });
        for (const file of files) {
          const path = join(staging, ...file.path.split("/"));
          await mkdir(dirname(path), { recursive: true });
          await writeFile(path, file.bytes, { flag: "wx" });
        }
        // Another install may have taken the name while this one wrote: the rename then fails
        // (a non-empty folder is never replaced) and this copy goes.
        if (await exists(target)) return false;
        try {
          await rename(staging, target);
        } catch (error) {
          const code = (error as { code?: string }).code;
          if (code === "ENOTEMPTY" || code === "EEXIST") return false;
          throw error;
        }
        return true;
      } catch (error) {
        throw new DeploymentFilesError(
          "deployment_files_write_failed",
          `Could not write ${folder} into ${description} (${error instanceof Error ? error.message : String(error)}); check that the gateway may write there.`,
        );
      } finally {
        await rm(staging, { recursive: true, force: true }).catch(() => undefined);
      }
    },
  };
}
