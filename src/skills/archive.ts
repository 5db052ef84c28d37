import { DeerflowError } from "../core/errors.ts";
import { parseSkillMarkdown } from "./front-matter.ts";
import { SKILL_FILE_NAME } from "./registry.ts";

/*
 * A skill archive (`.skill`, a ZIP file) read whole into memory and checked before anything is
 * written: an entry that escapes the skill folder, a link, a device, an encrypted or unknown entry,
 * too many entries or too many bytes refuses the whole archive, naming the entry.
 *
 * A minimal reader of our own, because no ZIP library is among the project's packages (fflate,
 * jszip and yauzl are not installed) and src/ may use Web APIs only: it walks the central
 * directory and inflates with DecompressionStream("deflate-raw"), which Node, Deno, Bun and
 * workerd all provide. It reads stored and deflated entries, which is what every common zip tool
 * writes; ZIP64, multi-disk and encrypted archives are refused with a sentence saying so.
 */

export const DEFAULT_SKILL_ARCHIVE_MAX_ENTRIES = 1000;
export const DEFAULT_SKILL_ARCHIVE_MAX_BYTES = 64 * 1024 * 1024;

/** A skill's name as a folder and a slash command: lowercase letters and digits, single hyphens. */
export const SKILL_NAME_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const MAX_SKILL_NAME_LENGTH = 64;

export interface SkillArchiveLimits {
  /** Entries in the archive, folders included. */
  readonly maxEntries: number;
  /** Bytes of every file once unpacked. */
  readonly maxBytes: number;
}

export interface SkillArchiveFile {
  /** Inside the skill folder, "/"-separated: `SKILL.md`, `references/api.md`. */
  readonly path: string;
  readonly bytes: Uint8Array;
}

export interface SkillArchive {
  /** From SKILL.md's front matter; also the folder it installs into. */
  readonly name: string;
  readonly description: string;
  readonly files: readonly SkillArchiveFile[];
}

function rejected(message: string): DeerflowError {
  return new DeerflowError("skill_archive_rejected", message);
}

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
const EOCD_SIZE = 22;
const MAX_COMMENT = 0xffff;
const UNIX_HOST = 3;
const FILE_TYPE_MASK = 0o170000;
const REGULAR_FILE = 0o100000;
const DIRECTORY = 0o040000;
const FLAG_ENCRYPTED = 0x1;
const FLAG_UTF8 = 0x800;
const METHOD_STORED = 0;
const METHOD_DEFLATE = 8;

// Native executables have no business in a skill (scripts are text the sandbox runs).
const EXECUTABLE_MAGICS: readonly (readonly number[])[] = [
  [0x7f, 0x45, 0x4c, 0x46],
  [0x4d, 0x5a],
  [0xfe, 0xed, 0xfa, 0xce],
  [0xfe, 0xed, 0xfa, 0xcf],
  [0xce, 0xfa, 0xed, 0xfe],
  [0xcf, 0xfa, 0xed, 0xfe],
  [0xca, 0xfe, 0xba, 0xbe],
  [0xbe, 0xba, 0xfe, 0xca],
];

interface CentralEntry {
  readonly name: string;
  readonly method: number;
  readonly crc: number;
  readonly compressedSize: number;
  readonly size: number;
  readonly localOffset: number;
  readonly isDirectory: boolean;
}

/**
 * Checks a skill archive and returns its files, relative to the skill folder: one top folder
 * holding SKILL.md is taken as the skill folder, otherwise SKILL.md must be at the top. Throws a
 * DeerflowError `skill_archive_rejected` naming the first bad entry.
 */
export async function readSkillArchive(bytes: Uint8Array, limits: SkillArchiveLimits): Promise<SkillArchive> {
  const entries = centralDirectory(bytes, limits);
  const seen = new Map<string, "file" | "folder">();
  for (const entry of entries) claimPath(seen, entry);

  let total = 0;
  const files: { path: string; bytes: Uint8Array }[] = [];
  for (const entry of entries) {
    if (entry.isDirectory) continue;
    total += entry.size;
    if (total > limits.maxBytes) {
      throw rejected(`The skill archive unpacks to more than ${limits.maxBytes} bytes (at entry ${JSON.stringify(entry.name)}); make the skill smaller.`);
    }
    const content = await entryBytes(bytes, entry);
    if (EXECUTABLE_MAGICS.some((magic) => magic.every((byte, i) => content[i] === byte))) {
      throw rejected(`Entry ${JSON.stringify(entry.name)} is a native executable; a skill may hold text, scripts and data only.`);
    }
    files.push({ path: entry.name, bytes: content });
  }

  const kept = files.filter((file) => !isMetadataPath(file.path));
  const root = skillRoot(kept.map((file) => file.path));
  const inside = kept.map((file) => ({ path: file.path.slice(root.length), bytes: file.bytes }));
  const skillFile = inside.find((file) => file.path === SKILL_FILE_NAME);
  if (!skillFile) {
    throw rejected(`The skill archive has no ${SKILL_FILE_NAME} at its top (or inside its one top folder); add one with a name and a description.`);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(skillFile.bytes);
  } catch {
    throw rejected(`${root}${SKILL_FILE_NAME} is not UTF-8 text.`);
  }
  const parsed = parseSkillMarkdown(text);
  if (!parsed.ok) throw rejected(`${root}${SKILL_FILE_NAME}: ${parsed.problem.message}`);
  const { name, description } = parsed.frontMatter;
  if (!SKILL_NAME_PATTERN.test(name) || name.length > MAX_SKILL_NAME_LENGTH) {
    throw rejected(
      `${root}${SKILL_FILE_NAME}: the skill name ${JSON.stringify(name)} must be 1 to ${MAX_SKILL_NAME_LENGTH} lowercase letters, digits and single hyphens (pdf-tools).`,
    );
  }
  return Object.freeze({ name, description, files: Object.freeze(inside.map((file) => Object.freeze(file))) });
}

function centralDirectory(bytes: Uint8Array, limits: SkillArchiveLimits): CentralEntry[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const eocd = findEndOfCentralDirectory(view);
  const disk = view.getUint16(eocd + 4, true);
  const cdDisk = view.getUint16(eocd + 6, true);
  const onDisk = view.getUint16(eocd + 8, true);
  const count = view.getUint16(eocd + 10, true);
  const cdSize = view.getUint32(eocd + 12, true);
  const cdOffset = view.getUint32(eocd + 16, true);
  if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
    throw rejected("The skill archive is a ZIP64 archive, which is not supported; zip the skill again (it should be far below 4 GB).");
  }
  if (disk !== 0 || cdDisk !== 0 || onDisk !== count) throw rejected("The skill archive spans several disks; zip the skill again as one file.");
  if (count > limits.maxEntries) {
    throw rejected(`The skill archive has ${count} entries, more than the ${limits.maxEntries} allowed; make the skill smaller.`);
  }
  if (cdOffset + cdSize > eocd) throw rejected("The skill archive is damaged: its directory lies outside the file.");

  const entries: CentralEntry[] = [];
  let at = cdOffset;
  for (let index = 0; index < count; index++) {
    if (at + 46 > bytes.length || view.getUint32(at, true) !== CENTRAL_SIGNATURE) {
      throw rejected(`The skill archive is damaged: entry ${index + 1} of its directory is unreadable.`);
    }
    const madeBy = view.getUint16(at + 4, true) >> 8;
    const flags = view.getUint16(at + 8, true);
    const method = view.getUint16(at + 10, true);
    const crc = view.getUint32(at + 16, true);
    const compressedSize = view.getUint32(at + 20, true);
    const size = view.getUint32(at + 24, true);
    const nameLength = view.getUint16(at + 28, true);
    const extraLength = view.getUint16(at + 30, true);
    const commentLength = view.getUint16(at + 32, true);
    const external = view.getUint32(at + 38, true);
    const localOffset = view.getUint32(at + 42, true);
    const rawName = bytes.subarray(at + 46, at + 46 + nameLength);
    at += 46 + nameLength + extraLength + commentLength;

    const name = decodeName(rawName, flags, index);
    const shown = JSON.stringify(name);
    const mode = madeBy === UNIX_HOST ? (external >>> 16) & FILE_TYPE_MASK : 0;
    const isDirectory = name.endsWith("/") || mode === DIRECTORY;
    if (mode !== 0 && mode !== REGULAR_FILE && mode !== DIRECTORY) {
      const kind = mode === 0o120000 ? "a symbolic link" : "not a regular file or folder";
      throw rejected(`Entry ${shown} is ${kind}; a skill archive may hold only files and folders.`);
    }
    // FAT's attribute byte: 0x400 marks a reparse point (a Windows link).
    if (madeBy !== UNIX_HOST && (external & 0x400) !== 0) {
      throw rejected(`Entry ${shown} is a link; a skill archive may hold only files and folders.`);
    }
    if (flags & FLAG_ENCRYPTED) throw rejected(`Entry ${shown} is encrypted; zip the skill again without a password.`);
    if (!isDirectory && method !== METHOD_STORED && method !== METHOD_DEFLATE) {
      throw rejected(`Entry ${shown} uses compression method ${method}; zip the skill again with ordinary (deflate) compression.`);
    }
    if (compressedSize === 0xffffffff || size === 0xffffffff || localOffset === 0xffffffff) {
      throw rejected(`Entry ${shown} needs ZIP64, which is not supported; make the skill smaller.`);
    }
    checkEntryPath(name.endsWith("/") ? name.slice(0, -1) : name, shown);
    entries.push({ name: name.endsWith("/") ? name.slice(0, -1) : name, method, crc, compressedSize, size, localOffset, isDirectory });
  }
  return entries;
}

function findEndOfCentralDirectory(view: DataView): number {
  const lowest = Math.max(0, view.byteLength - EOCD_SIZE - MAX_COMMENT);
  for (let at = view.byteLength - EOCD_SIZE; at >= lowest; at--) {
    if (view.getUint32(at, true) === EOCD_SIGNATURE) return at;
  }
  throw rejected("The file is not a ZIP archive; a .skill file is the skill's folder zipped.");
}

function decodeName(raw: Uint8Array, flags: number, index: number): string {
  if (raw.length === 0) throw rejected(`Entry ${index + 1} of the skill archive has no name.`);
  // Without the UTF-8 flag a name is CP437; only its ASCII subset reads the same either way.
  if (!(flags & FLAG_UTF8) && raw.some((byte) => byte > 0x7f)) {
    throw rejected(`Entry ${index + 1} of the skill archive has a name that is neither ASCII nor marked UTF-8; zip the skill again with a current tool.`);
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(raw);
  } catch {
    throw rejected(`Entry ${index + 1} of the skill archive has a name that is not valid UTF-8.`);
  }
}

/** An entry stays inside the skill folder: relative, no `..` or `.`, no empty segment, no drive, no backslash, no control character. */
function checkEntryPath(path: string, shown: string): void {
  if (path.startsWith("/") || /^[A-Za-z]:/.test(path)) throw rejected(`Entry ${shown} has an absolute path; every entry must be relative to the skill folder.`);
  if (path.includes("\\")) throw rejected(`Entry ${shown} contains a backslash; zip the skill again with "/" as the separator.`);
  const segments = path.split("/");
  if (segments.includes("..")) throw rejected(`Entry ${shown} climbs out of the skill folder with "..".`);
  // Control characters and ":" (an NTFS alternate data stream) have no place in a file name.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f:]/.test(path)) throw rejected(`Entry ${shown} has a control character or ":" in its name.`);
  if (segments.some((segment) => segment === "" || segment === ".")) throw rejected(`Entry ${shown} has an empty or "." path segment.`);
}

/** One path is either a file or a folder, once: two entries for one path, or a file under a file, refuse the archive. */
function claimPath(seen: Map<string, "file" | "folder">, entry: CentralEntry): void {
  const segments = entry.name.split("/");
  for (let depth = 1; depth < segments.length; depth++) {
    const parent = segments.slice(0, depth).join("/");
    if (seen.get(parent) === "file") throw rejected(`Entry ${JSON.stringify(entry.name)} lies under ${JSON.stringify(parent)}, which is a file.`);
    seen.set(parent, "folder");
  }
  const before = seen.get(entry.name);
  if (before === "file" || (before === "folder" && !entry.isDirectory)) {
    throw rejected(`Entry ${JSON.stringify(entry.name)} appears twice in the skill archive (or as both a file and a folder).`);
  }
  seen.set(entry.name, entry.isDirectory ? "folder" : "file");
}

async function entryBytes(bytes: Uint8Array, entry: CentralEntry): Promise<Uint8Array> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const at = entry.localOffset;
  const shown = JSON.stringify(entry.name);
  if (at + 30 > bytes.length || view.getUint32(at, true) !== LOCAL_SIGNATURE) throw rejected(`The skill archive is damaged at entry ${shown}.`);
  const start = at + 30 + view.getUint16(at + 26, true) + view.getUint16(at + 28, true);
  if (start + entry.compressedSize > bytes.length) throw rejected(`The skill archive is damaged: entry ${shown} runs past the end of the file.`);
  const packed = bytes.subarray(start, start + entry.compressedSize);
  const content = entry.method === METHOD_STORED ? packed.slice() : await inflate(packed, entry.size, shown);
  if (content.length !== entry.size || crc32(content) !== entry.crc) {
    throw rejected(`The skill archive is damaged: entry ${shown} does not unpack to what its directory records.`);
  }
  return content;
}

/** Raw deflate, stopped as soon as it produces more than the directory promised (a zip bomb lies about sizes). */
async function inflate(packed: Uint8Array, expected: number, shown: string): Promise<Uint8Array> {
  const stream = new Blob([packed as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  const reader = stream.getReader();
  const out = new Uint8Array(expected);
  let length = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (length + value.length > expected) {
        await reader.cancel().catch(() => undefined);
        throw rejected(`Entry ${shown} unpacks to more bytes than the archive's directory records; the archive is damaged or hostile.`);
      }
      out.set(value, length);
      length += value.length;
    }
  } catch (error) {
    if (error instanceof DeerflowError) throw error;
    throw rejected(`Entry ${shown} could not be unpacked (${error instanceof Error ? error.message : String(error)}); the archive is damaged.`);
  }
  return length === expected ? out : out.slice(0, length);
}

let crcTable: Uint32Array | undefined;

function crc32(data: Uint8Array): number {
  crcTable ??= Uint32Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  let crc = 0xffffffff;
  for (const byte of data) crc = crcTable[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** What archivers add beside the content: macOS resource forks and Finder files. */
function isMetadataPath(path: string): boolean {
  const segments = path.split("/");
  return segments[0] === "__MACOSX" || segments.at(-1) === ".DS_Store";
}

/** "" when SKILL.md is at the top, else "<folder>/" when every file sits in that one folder. */
function skillRoot(paths: readonly string[]): string {
  if (paths.includes(SKILL_FILE_NAME)) return "";
  const tops = new Set(paths.map((path) => path.split("/")[0]));
  if (tops.size === 1 && paths.every((path) => path.includes("/"))) return `${[...tops][0]}/`;
  return "";
}
