/** `http://host:port`, with IPv6 literals bracketed. */
export function serverUrl(hostname: string, port: number): string {
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  return `http://${host}:${port}`;
}
