import type { Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as v from "valibot";
import { bytesToHex, sha256Bytes } from "../../core/hex.ts";
import type { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { isInsideVirtualRoots, normalizePosixPath } from "../../core/path.ts";
import { fileSuffix, isUploadStagingFile } from "../../sandbox/upload-names.ts";
import { SandboxError, VIRTUAL_DIRS } from "../../ports/sandbox.ts";
import { isValidThreadId } from "../../runtime/thread-store.ts";
import { httpError, jsonObject, parseRequest } from "../errors.ts";
import { readJsonBody } from "../request-limits.ts";
import type { DirEntry, Sandbox, SandboxProvider, SandboxScope, SandboxUploads } from "../../ports/sandbox.ts";
import { sandboxWrittenUploads } from "../../sandbox/written-uploads.ts";
import { contentDisposition, contentTypeFor, isActiveContentType, parseByteRange, streamUploadInto, UploadBodyError } from "../files-http.ts";
import {
  artifactUrl,
  assertBareFileName,
  claimUniqueFileName,
  FileNameError,
  uploadFileName,
  uploadVirtualPath,
} from "../files-names.ts";
import type { GatewayEnv, RouteGuard, ThreadRecord } from "../types.ts";

/**
 * Thread files over HTTP: uploads into the thread's sandbox (`/mnt/user-data/uploads`) and
 * artifacts read back from anywhere under `/mnt/user-data`. Every byte goes through the Sandbox
 * port, so the same routes serve the virtual, local and remote sandboxes.
 */

export interface UploadLimits {
  /** Files in one upload request. */
  readonly maxFiles: number;
  /** Bytes of one file. */
  readonly maxFileBytes: number;
  /** Bytes of all files of one request. */
  readonly maxTotalBytes: number;
}

const MIB = 1024 * 1024;
export const DEFAULT_UPLOAD_LIMITS: UploadLimits = Object.freeze({ maxFiles: 10, maxFileBytes: 50 * MIB, maxTotalBytes: 100 * MIB });

/** Room for multipart boundaries and part headers (a 255-byte name percent-encoded is 765 bytes). */
const MULTIPART_ALLOWANCE_PER_PART = 2048;
const MULTIPART_ALLOWANCE = 16 * 1024;

export interface FileRoutesDeps {
  readonly sandbox: SandboxProvider;
  readonly guard: RouteGuard;
  readonly limits?: Partial<UploadLimits>;
  /** True while a run works on the thread; deleting an upload then would pull a file from under it. */
  readonly hasActiveRun?: (threadId: string) => boolean | Promise<boolean>;
  /**
   * Called once an upload request's body has been read (stored or refused): the memory its
   * chunks passed through is garbage now (GatewayRunHooks.memoryReleased).
   */
  readonly onBodyReleased?: () => void;
}

/** JSON body of a file entry, as upstream's UploadedFileInfo names its fields. */
export interface UploadedFileInfo {
  readonly filename: string;
  readonly size: number;
  readonly path: string;
  readonly virtual_path: string;
  readonly artifact_url: string;
  readonly extension?: string;
  readonly original_filename?: string;
}

function resolveLimits(partial: Partial<UploadLimits> | undefined): UploadLimits {
  const limits = { ...DEFAULT_UPLOAD_LIMITS, ...partial };
  for (const [key, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new TypeError(`File routes: limits.${key} must be a whole number of 1 or more, got ${String(value)}.`);
    }
  }
  return limits;
}

function fail(c: Context<GatewayEnv>, status: ContentfulStatusCode, detail: string): Response {
  return c.json({ detail }, status);
}

/** The thread id from the path, or a 422 as upstream's ThreadId validation answers. */
function threadIdOf(c: Context<GatewayEnv>): string {
  const threadId = c.req.param("thread_id") ?? "";
  if (isValidThreadId(threadId)) return threadId;
  const shown = JSON.stringify(String(threadId).slice(0, 80));
  throw httpError(422, `Invalid thread_id ${shown}: use 1 to 64 letters, digits, "_" or "-" (a UUID fits).`);
}

/**
 * Files live in the sandbox of the thread's owner, where the agent's runs see them; a thread
 * without a recorded owner (or not created yet, for an upload that precedes the first run) uses
 * the caller's, which is where that caller's first run will look.
 */
function threadScope(c: Context<GatewayEnv>, threadId: string, thread: ThreadRecord | undefined): SandboxScope {
  const userId = thread?.owner_id ?? c.get("user")?.id;
  if (!userId) {
    throw httpError(401, { code: "not_authenticated", message: "Sign in to use thread files." });
  }
  return { userId, threadId };
}

async function threadSandbox(deps: Pick<FileRoutesDeps, "sandbox">, c: Context<GatewayEnv>, threadId: string, thread: ThreadRecord | undefined): Promise<Sandbox> {
  try {
    return await deps.sandbox.acquire(threadScope(c, threadId, thread));
  } catch (error) {
    if (error instanceof SandboxError) throw sandboxHttpError(error);
    throw error;
  }
}

function sandboxHttpError(error: SandboxError): HTTPException {
  if (error.code === "not_found") return httpError(404, error.message);
  if (error.code === "path_outside_sandbox") return httpError(403, error.message);
  if (error.code === "is_directory") return httpError(400, error.message);
  return httpError(503, `The thread's sandbox is unavailable: ${error.message}`);
}

function fileInfo(threadId: string, filename: string, size: number): UploadedFileInfo {
  const virtualPath = uploadVirtualPath(filename);
  return { filename, size, path: virtualPath, virtual_path: virtualPath, artifact_url: artifactUrl(threadId, virtualPath) };
}

/** Bytes a Response accepts as they are; a view over shared memory is copied first. */
function responseBody(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes);
}

const utf8 = new TextEncoder();

const ARTIFACT_EDIT_EXAMPLE = '{"content": "...", "expected_sha256": "<sha256 of the file as opened>"}';
const ArtifactEditSchema = v.strictObject({
  content: v.string(),
  expected_sha256: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/, "expected 64 lowercase hex digits (the SHA-256 of the file as opened)")),
});

async function sha256Of(bytes: Uint8Array): Promise<string> {
  return bytesToHex(await sha256Bytes(bytes));
}

function isUtf8(bytes: Uint8Array): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * The virtual path an artifact route names, normalised; a 403 for `..` and for anything outside
 * /mnt/user-data. Decided on the decoded path before any normalisation, so `..` (also sent as
 * %2e%2e or ..%2f) is refused even where it would land back inside the sandbox.
 */
function artifactPathOf(c: Context<GatewayEnv>): string {
  return threadVirtualPath(`/${c.req.param("path")}`);
}

/** `requested` (a virtual path, the leading "/" optional) normalised, or the 403 of artifactPathOf. */
export function threadVirtualPath(requested: string): string {
  if (!requested.startsWith("/")) requested = `/${requested}`;
  if (requested.split("/").includes("..") || requested.includes("\0")) {
    throw httpError(403, "Access denied: path traversal detected. Ask for a path under /mnt/user-data without '..'.");
  }
  const virtualPath = normalizePosixPath(requested);
  if (!isInsideVirtualRoots(virtualPath)) {
    throw httpError(
      403,
      `Access denied: ${JSON.stringify(virtualPath)} is outside the thread's files. ` +
        `Ask for a path under ${VIRTUAL_DIRS.workspace}, ${VIRTUAL_DIRS.uploads} or ${VIRTUAL_DIRS.outputs}.`,
    );
  }
  return virtualPath;
}

/**
 * The bytes of a thread file by its virtual path, as the artifact route serves it: an upload from
 * the upload store when it holds one, else from the thread owner's sandbox. A SandboxError
 * (not_found, is_directory) reaches the caller as thrown.
 */
export async function readThreadFile(
  sandbox: SandboxProvider,
  c: Context<GatewayEnv>,
  threadId: string,
  thread: ThreadRecord | undefined,
  virtualPath: string,
): Promise<Uint8Array> {
  const uploads: SandboxUploads = sandbox.uploads ?? sandboxWrittenUploads(sandbox);
  const uploadName = virtualPath.startsWith(`${VIRTUAL_DIRS.uploads}/`) ? virtualPath.slice(VIRTUAL_DIRS.uploads.length + 1) : "";
  const stored = uploadName && !uploadName.includes("/") ? await uploads.read?.(threadScope(c, threadId, thread), uploadName) : undefined;
  return stored ?? (await threadSandbox({ sandbox }, c, threadId, thread)).readFileBytes(virtualPath);
}

/**
 * Mounts the thread file routes on `app` (the `/api` sub-app): uploads (POST, `/list`, `/limits`,
 * DELETE one) and artifacts (GET any file under /mnt/user-data). Authorization goes through
 * `deps.guard` once per request; the route reads `c.get("user")` only to pick a sandbox for a
 * thread that has no owner.
 */
export function registerFileRoutes(app: Hono<GatewayEnv>, deps: FileRoutesDeps): void {
  const limits = resolveLimits(deps.limits);
  const maxBodyBytes = limits.maxTotalBytes + limits.maxFiles * MULTIPART_ALLOWANCE_PER_PART + MULTIPART_ALLOWANCE;
  const uploads: SandboxUploads = deps.sandbox.uploads ?? sandboxWrittenUploads(deps.sandbox);

  // Upstream lets an upload precede the thread: the web client uploads, then starts the run that
  // creates the thread. So the row may be missing, but another owner's row is still a 404.
  app.post("/threads/:thread_id/uploads", async (c) => {
    const threadId = threadIdOf(c);
    const thread = await deps.guard.thread(c, "threads:write", threadId, { requireExisting: false });

    const scope = threadScope(c, threadId, thread);
    const taken = new Set<string>();
    const nameOf = (raw: string) => {
      try {
        const originalFilename = uploadFileName(raw);
        return { originalFilename, filename: claimUniqueFileName(originalFilename, taken) };
      } catch (error) {
        if (error instanceof FileNameError) throw new UploadBodyError(400, error.message);
        throw error;
      }
    };
    let received;
    const batch = await uploads.begin(scope);
    try {
      received = await streamUploadInto(c.req.raw, { ...limits, maxBodyBytes }, batch, nameOf);
      await batch.commit();
      deps.onBodyReleased?.();
    } catch (error) {
      deps.onBodyReleased?.();
      await batch.abort().catch(() => undefined);
      if (error instanceof UploadBodyError) return fail(c, error.status, error.message);
      if (error instanceof SandboxError && error.code === "is_directory") {
        return fail(c, 409, `Cannot upload: ${error.message} Rename the file, or remove what is at that path first.`);
      }
      // Anything else (a host file system error may name host paths) goes to the gateway's
      // error handler, which logs it and answers without internals.
      if (error instanceof SandboxError) throw sandboxHttpError(error);
      throw error;
    }

    const uploaded = received.map((item) => ({
      ...fileInfo(threadId, item.filename, item.size),
      ...(item.filename !== item.originalFilename ? { original_filename: item.originalFilename } : {}),
    }));
    return c.json({
      success: true,
      files: uploaded,
      message: `Successfully uploaded ${uploaded.length} file(s)`,
      skipped_files: [],
    });
  });

  app.get("/threads/:thread_id/uploads/limits", async (c) => {
    const threadId = threadIdOf(c);
    await deps.guard.thread(c, "threads:read", threadId);
    return c.json({ max_files: limits.maxFiles, max_file_size: limits.maxFileBytes, max_total_size: limits.maxTotalBytes });
  });

  app.get("/threads/:thread_id/uploads/list", async (c) => {
    const threadId = threadIdOf(c);
    const thread = await deps.guard.thread(c, "threads:read", threadId);
    let entries: DirEntry[];
    try {
      const stored = await uploads.list?.(threadScope(c, threadId, thread));
      entries = stored
        ? stored.map(({ name, size }) => ({ name, size, type: "file" as const, path: uploadVirtualPath(name) }))
        : await (await threadSandbox(deps, c, threadId, thread)).list(VIRTUAL_DIRS.uploads, { depth: 1 });
    } catch (error) {
      if (error instanceof SandboxError && error.code === "not_found") entries = [];
      else if (error instanceof SandboxError) throw sandboxHttpError(error);
      else throw error;
    }
    const files = entries
      .filter((entry) => entry.type === "file" && !isUploadStagingFile(entry.name))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((entry) => ({ ...fileInfo(threadId, entry.name, entry.size ?? 0), extension: fileSuffix(entry.name) }));
    return c.json({ files, count: files.length });
  });

  // Upstream guards this with threads:delete on an existing thread (a shared RBAC policy keeps
  // meaning the same thing on both servers).
  app.delete("/threads/:thread_id/uploads/:filename", async (c) => {
    const threadId = threadIdOf(c);
    const thread = await deps.guard.thread(c, "threads:delete", threadId, { requireExisting: true });
    const raw = c.req.param("filename");
    let filename: string;
    try {
      filename = assertBareFileName(raw);
    } catch (error) {
      if (error instanceof FileNameError) return fail(c, 400, error.message);
      throw error;
    }
    if (await deps.hasActiveRun?.(threadId)) {
      return fail(c, 409, `Thread ${threadId} has a run in flight. Delete ${JSON.stringify(filename)} after the run finishes.`);
    }
    try {
      const removed = await uploads.remove?.(threadScope(c, threadId, thread), filename);
      if (!removed) await (await threadSandbox(deps, c, threadId, thread)).remove(uploadVirtualPath(filename));
    } catch (error) {
      if (error instanceof SandboxError && error.code === "not_found") return fail(c, 404, `File not found: ${filename}`);
      if (error instanceof SandboxError && error.code === "is_directory") {
        return fail(c, 400, `${filename} is a folder in the uploads directory; only uploaded files can be deleted here.`);
      }
      if (error instanceof SandboxError) throw sandboxHttpError(error);
      throw error;
    }
    return c.json({ success: true, message: `Deleted ${filename}` });
  });

  app.get("/threads/:thread_id/artifacts/:path{.+}", async (c) => {
    const threadId = threadIdOf(c);
    const thread = await deps.guard.thread(c, "threads:read", threadId);
    const virtualPath = artifactPathOf(c);
    let bytes: Uint8Array;
    try {
      bytes = await readThreadFile(deps.sandbox, c, threadId, thread, virtualPath);
    } catch (error) {
      if (error instanceof SandboxError && error.code === "not_found") return fail(c, 404, `Artifact not found: ${virtualPath}`);
      if (error instanceof SandboxError && error.code === "is_directory") {
        return fail(c, 400, `Path is not a file: ${virtualPath}. List the thread's files and ask for one of them.`);
      }
      if (error instanceof SandboxError) throw sandboxHttpError(error);
      throw error;
    }

    const name = virtualPath.slice(virtualPath.lastIndexOf("/") + 1);
    const contentType = contentTypeFor(name, bytes);
    const download = /^(1|true|yes|on)$/i.test(c.req.query("download") ?? "");
    const attachment = download || isActiveContentType(contentType);
    const headers = new Headers({
      "Content-Type": contentType,
      "Content-Disposition": contentDisposition(attachment ? "attachment" : "inline", name),
      "X-Content-Type-Options": "nosniff",
      "Accept-Ranges": "bytes",
    });
    // No validator is offered, so an If-Range can never be proven current: send the whole file.
    const range = c.req.header("if-range") ? ({ kind: "whole" } as const) : parseByteRange(c.req.header("range"), bytes.length);
    if (range.kind === "unsatisfiable") {
      headers.set("Content-Range", `bytes */${bytes.length}`);
      headers.set("Content-Type", "application/json");
      headers.delete("Content-Disposition");
      return new Response(JSON.stringify({ detail: `Requested range is not satisfiable: the file is ${bytes.length} bytes.` }), { status: 416, headers });
    }
    if (range.kind === "range") {
      headers.set("Content-Range", `bytes ${range.start}-${range.end}/${bytes.length}`);
      headers.set("Content-Length", String(range.end - range.start + 1));
      return new Response(bytes.slice(range.start, range.end + 1), { status: 206, headers });
    }
    headers.set("Content-Length", String(bytes.length));
    return new Response(responseBody(bytes), { status: 200, headers });
  });
  // The artifacts panel's editor: replaces one text file under the outputs folder, as the UI saw it
  // (`expected_sha256` of what it opened), whole and at once, and stored before the answer.
  const maxEditBodyBytes = limits.maxFileBytes * 2 + MULTIPART_ALLOWANCE;
  app.put(
    "/threads/:thread_id/artifacts/:path{.+}",
    bodyLimit({
      maxSize: maxEditBodyBytes,
      onError: (c) => fail(c, 413, `Request body too large: more than ${maxEditBodyBytes} bytes. An edited artifact may hold at most ${limits.maxFileBytes} bytes.`),
    }),
    async (c) => {
      const threadId = threadIdOf(c);
      const thread = await deps.guard.thread(c, "threads:write", threadId, { requireExisting: true });
      const virtualPath = artifactPathOf(c);
      if (!virtualPath.startsWith(`${VIRTUAL_DIRS.outputs}/`)) {
        return fail(c, 403, `Access denied: only files under ${VIRTUAL_DIRS.outputs} can be edited; ${JSON.stringify(virtualPath)} is not there.`);
      }
      if (virtualPath.split("/").some((segment) => segment.endsWith(".skill"))) {
        return fail(c, 415, `${virtualPath} is (inside) a skill archive, which cannot be edited as text. Edit the skill's files instead.`);
      }
      const body = parseRequest(jsonObject(ArtifactEditSchema), (await readJsonBody(c, ARTIFACT_EDIT_EXAMPLE)) ?? {});
      const updated = utf8.encode(body.content);
      if (updated.length > limits.maxFileBytes) {
        return fail(c, 413, `The edited artifact is ${updated.length} bytes; the limit is ${limits.maxFileBytes} bytes per file.`);
      }
      if (updated.includes(0)) return fail(c, 415, "The content holds a NUL character: only text can be saved as an artifact.");
      if (await deps.hasActiveRun?.(threadId)) {
        return fail(c, 409, `Thread ${threadId} has a run in flight. Save ${virtualPath} after the run finishes.`);
      }
      const sandbox = await threadSandbox(deps, c, threadId, thread);
      let current: Uint8Array;
      try {
        current = await sandbox.readFileBytes(virtualPath);
      } catch (error) {
        if (error instanceof SandboxError && error.code === "not_found") return fail(c, 404, `Artifact not found: ${virtualPath}`);
        if (error instanceof SandboxError && error.code === "is_directory") return fail(c, 400, `Path is not a file: ${virtualPath}`);
        if (error instanceof SandboxError) throw sandboxHttpError(error);
        throw error;
      }
      if (current.includes(0) || !isUtf8(current)) return fail(c, 415, `${virtualPath} is not UTF-8 text; only text artifacts can be edited.`);
      if ((await sha256Of(current)) !== body.expected_sha256) {
        return fail(c, 412, `${virtualPath} changed since it was opened: load it again and redo the edit.`);
      }
      try {
        await sandbox.writeFileBytes(virtualPath, updated);
        await sandbox.flush?.();
      } catch (error) {
        if (error instanceof SandboxError) throw sandboxHttpError(error);
        throw error;
      }
      return c.json({ path: virtualPath, sha256: await sha256Of(updated), size: updated.length });
    },
  );
}
