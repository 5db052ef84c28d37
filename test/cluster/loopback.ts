// The cluster harness's own servers (model, counter, proxy) on a free loopback port.
import type { IncomingMessage, Server } from "node:http";

export interface Listening {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  readonly port: number;
  /** Stops accepting, drops open connections (streams included) and waits for the server to close. */
  close(): Promise<void>;
}

export function listenLoopback(server: Server): Promise<Listening> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") return reject(new Error("no TCP address"));
      resolve({
        url: `http://127.0.0.1:${address.port}`,
        port: address.port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

/** A request's whole body as JSON ({} when empty). */
export async function readJson(req: IncomingMessage): Promise<Record<string, any>> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  const text = Buffer.concat(parts).toString("utf8");
  return text === "" ? {} : (JSON.parse(text) as Record<string, any>);
}
