// Whether a URL's host is this machine or a private network, as written (no DNS): web_fetch's
// first line of defence, applied to the request and to every redirect hop.

function parseIPv4(host: string): number[] | undefined {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((part) => /^\d{1,3}$/.test(part))) return undefined;
  const octets = parts.map(Number);
  return octets.every((n) => n <= 255) ? octets : undefined;
}

function isPrivateIPv4([a, b, c]: number[]): boolean {
  return (
    a === 0 || a === 10 || a === 127 || a! >= 224 || // this network, private, loopback, multicast and reserved
    (a === 100 && b! >= 64 && b! <= 127) || // carrier-grade NAT
    (a === 169 && b === 254) || // link-local, cloud metadata
    (a === 172 && b! >= 16 && b! <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && (c === 0 || c === 2)) ||
    (a === 198 && (b === 18 || b === 19)) ||
    (a === 198 && b === 51 && c === 100) ||
    (a === 203 && b === 0 && c === 113)
  );
}

/** Eight 16-bit groups, or undefined when the text is not an IPv6 address. */
function parseIPv6(text: string): number[] | undefined {
  let host = text.replace(/^\[|\]$/g, "").split("%")[0]!;
  const tail = host.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (tail) {
    const v4 = parseIPv4(tail[1]!);
    if (!v4) return undefined;
    host = `${host.slice(0, -tail[1]!.length)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = host.split("::");
  if (halves.length > 2) return undefined;
  const read = (part: string) => (part === "" ? [] : part.split(":"));
  const head = read(halves[0]!);
  const rest = halves.length === 2 ? read(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if ((halves.length === 1 && missing !== 0) || missing < 0) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/i.test(group))) return undefined;
  return groups.map((group) => parseInt(group, 16));
}

function isPrivateIPv6(groups: number[]): boolean {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number];
  const embedded = [g6 >> 8, g6 & 0xff, g7 >> 8, g7 & 0xff];
  if (groups.every((g) => g === 0)) return true; // unspecified
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0) {
    if (g5 === 0 && g6 === 0 && g7 === 1) return true; // loopback
    if (g5 === 0xffff || g5 === 0) return isPrivateIPv4(embedded); // IPv4-mapped and -compatible
  }
  if (g0 === 0x64 && g1 === 0xff9b) return isPrivateIPv4(embedded); // NAT64
  if (g0 === 0x2002) return isPrivateIPv4([g1 >> 8, g1 & 0xff, g2 >> 8, g2 & 0xff]); // 6to4
  return (g0 & 0xfe00) === 0xfc00 || (g0 & 0xffc0) === 0xfe80 || (g0 & 0xff00) === 0xff00; // unique-local, link-local, multicast
}

/** An address literal in a private, loopback, link-local or otherwise non-public range. */
export function isPrivateAddress(address: string): boolean {
  const v4 = parseIPv4(address);
  if (v4) return isPrivateIPv4(v4);
  const v6 = parseIPv6(address);
  return v6 ? isPrivateIPv6(v6) : false;
}

/** A hostname (as URL parsing writes it) that names this machine or a private network. */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".local") || host.endsWith(".internal")) return true;
  return isPrivateAddress(host);
}
