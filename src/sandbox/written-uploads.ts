import { SandboxError, VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { Sandbox, SandboxProvider, SandboxUploads, UploadBatch } from "../ports/sandbox.ts";

/**
 * Uploads for a provider that has no upload store of its own (a remote sandbox): each file is
 * gathered, then written through the sandbox's writeFileBytes at commit, all or nothing. Such a
 * provider holds a request's files in memory until commit and is as durable as its writes are; the
 * virtual and local providers stream to storage instead.
 */
export function sandboxWrittenUploads(provider: SandboxProvider): SandboxUploads {
  return {
    async begin(scope): Promise<UploadBatch> {
      const files: Array<{ path: string; chunks: Uint8Array[] }> = [];
      return {
        async file(name) {
          const file = { path: `${VIRTUAL_DIRS.uploads}/${name}`, chunks: [] as Uint8Array[] };
          files.push(file);
          return {
            write: async (chunk) => void file.chunks.push(chunk.slice()),
            close: async () => undefined,
          };
        },
        async commit() {
          const sandbox = await provider.acquire(scope);
          const previous = await previousContents(sandbox, files.map((file) => file.path));
          let written = 0;
          try {
            for (const file of files) {
              await sandbox.writeFileBytes(file.path, joined(file.chunks));
              written++;
            }
          } catch (error) {
            // The failed write may have left its destination changed as well, so it is restored too.
            for (let i = Math.min(written, files.length - 1); i >= 0; i--) {
              const before = previous[i];
              const path = files[i]!.path;
              await (before === undefined ? sandbox.remove(path) : sandbox.writeFileBytes(path, before)).catch(() => undefined);
            }
            throw error;
          }
        },
        async abort() {
          files.length = 0;
        },
      };
    },
  };
}

function joined(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/** The bytes now at each destination; a folder or a link there refuses the request before anything is written. */
async function previousContents(sandbox: Sandbox, paths: readonly string[]): Promise<Array<Uint8Array | undefined>> {
  const previous: Array<Uint8Array | undefined> = [];
  for (const path of paths) {
    try {
      previous.push(await sandbox.readFileBytes(path));
    } catch (error) {
      if (error instanceof SandboxError && error.code === "not_found") {
        previous.push(undefined);
        continue;
      }
      if (error instanceof SandboxError && (error.code === "is_directory" || error.code === "path_outside_sandbox")) {
        throw new SandboxError("is_directory", `${path} is a folder or a link in the sandbox, not a file.`);
      }
      throw error;
    }
  }
  return previous;
}
