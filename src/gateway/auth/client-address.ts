import type { ConnectionInfo } from "../../ports/http-server.ts";

/*
 * Who is on the other end of a request's connection, for login throttling. The server adapter hands
 * Gateway.fetch the peer address (ConnectionInfo); it is remembered per Request here, so the auth
 * layer can ask about the Request Hono hands it. X-Forwarded-For is believed only from a peer listed
 * in gateway.trusted_proxies: anyone else could name any address in it and escape the limiter.
 */

/** The one bucket shared by requests that came with no connection info (in-process calls, tests). */
export const UNKNOWN_CLIENT_ADDRESS = "unknown";

const connections = new WeakMap<Request, string>();

/**
 * The peer address out of a fetch handler's second argument: our ConnectionInfo, or the
 * `{ remoteAddr: { hostname } }` a platform-owned server (`deno serve`) passes to an exported handler.
 */
export function connectionAddress(info: ConnectionInfo | { readonly remoteAddr?: { readonly hostname?: unknown } } | undefined): string | undefined {
  if (info === null || typeof info !== "object") return undefined;
  if ("remoteAddress" in info && typeof info.remoteAddress === "string") return info.remoteAddress;
  const remote = "remoteAddr" in info ? info.remoteAddr : undefined;
  return typeof remote?.hostname === "string" ? remote.hostname : undefined;
}

export function rememberConnection(request: Request, remoteAddress: string | undefined): void {
  const address = remoteAddress === undefined ? null : normalizeIpAddress(remoteAddress);
  if (address !== null) connections.set(request, address);
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function isIpv4(text: string): boolean {
  const match = IPV4.exec(text);
  return match !== null && match.slice(1).every((octet) => Number(octet) <= 255);
}

/** The eight hextets of an IPv6 address (an embedded IPv4 tail included), or null when it is not one. */
function ipv6Hextets(text: string): number[] | null {
  if (!/^[0-9a-f:.]+$/.test(text) || !text.includes(":")) return null;
  let body = text;
  const lastColon = body.lastIndexOf(":");
  const v4 = body.slice(lastColon + 1);
  if (v4.includes(".")) {
    // An embedded IPv4 tail (`::ffff:10.0.0.5`) is the last two hextets.
    if (!isIpv4(v4)) return null;
    const [a, b, c, d] = v4.split(".").map(Number) as [number, number, number, number];
    body = `${body.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = body.split("::");
  if (halves.length > 2) return null;
  const parse = (part: string): number[] | null => {
    if (part === "") return [];
    const groups = part.split(":");
    if (groups.some((group) => !/^[0-9a-f]{1,4}$/.test(group))) return null;
    return groups.map((group) => parseInt(group, 16));
  };
  const head = parse(halves[0]!);
  const rest = halves.length === 2 ? parse(halves[1]!) : [];
  if (head === null || rest === null) return null;
  const given = head.length + rest.length;
  if (halves.length === 1 ? given !== 8 : given > 7) return null;
  return [...head, ...new Array<number>(8 - given).fill(0), ...rest];
}

/**
 * An address in one spelling per host: IPv4 dotted, IPv6 lower-case and fully expanded, an IPv4-mapped
 * IPv6 address (`::ffff:10.0.0.5`, how a dual-stack socket reports an IPv4 peer) as its IPv4 form.
 * Brackets and a zone (`%eth0`) are dropped. Null when it is not an IP address.
 */
export function normalizeIpAddress(raw: string): string | null {
  const text = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  if (isIpv4(text)) return text.split(".").map(Number).join(".");
  const hextets = ipv6Hextets(text);
  if (hextets === null) return null;
  if (hextets.slice(0, 5).every((h) => h === 0) && hextets[5] === 0xffff) {
    return [hextets[6]! >> 8, hextets[6]! & 255, hextets[7]! >> 8, hextets[7]! & 255].join(".");
  }
  return hextets.map((h) => h.toString(16)).join(":");
}

/**
 * The client's address: the socket's peer, or, when that peer is a trusted proxy, the last
 * X-Forwarded-For entry that is not itself a trusted proxy (entries to its left were written by
 * whoever sent the request and prove nothing).
 */
export function clientAddress(request: Request, trustedProxies: ReadonlySet<string>): string {
  const peer = connections.get(request);
  if (peer === undefined) return UNKNOWN_CLIENT_ADDRESS;
  if (!trustedProxies.has(peer)) return peer;
  const forwarded = request.headers.get("x-forwarded-for");
  if (forwarded === null) return peer;
  const hops = forwarded.split(",");
  for (let index = hops.length - 1; index >= 0; index--) {
    const hop = normalizeIpAddress(hops[index]!);
    if (hop === null) return peer;
    if (!trustedProxies.has(hop)) return hop;
  }
  return peer;
}

/**
 * The throttling bucket of an address: an IPv4 address itself; an IPv6 address's /64, since one
 * host is usually handed a whole /64 and could otherwise try from 2^64 "different" addresses.
 */
export function addressBucket(address: string): string {
  if (!address.includes(":")) return address;
  return `${address.split(":").slice(0, 4).join(":")}::/64`;
}

export function normalizeIpAddresses(addresses: readonly string[]): ReadonlySet<string> {
  const out = new Set<string>();
  for (const address of addresses) {
    const normalized = normalizeIpAddress(address);
    if (normalized !== null) out.add(normalized);
  }
  return out;
}
