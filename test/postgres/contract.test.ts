// The coordinator and stream bus contract suites against PostgreSQL: each harness gets a fresh
// database, and `another()` is a second worker (its own pool, its own LISTEN connection).
import type pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { PostgresRunCoordinator } from "../../adapters/shared/postgres/run-coordinator.ts";
import { PostgresStreamBus } from "../../adapters/shared/postgres/stream-bus.ts";
import { describeCoordinatorContract } from "../runtime/runs/coordinator-contract.ts";
import { describeStreamBusContract } from "../runtime/runs/stream-bus-contract.ts";
import { startRunsServer, type RunsDatabase, type RunsServer } from "./runs-database.ts";

let server: RunsServer;

beforeAll(async () => {
  server = await startRunsServer();
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

describeCoordinatorContract("PostgreSQL", async (options = {}) => {
  const database = await server.database();
  const worker = () => new PostgresRunCoordinator({ pool: database.pool(), ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }) });
  const opened = [worker()];
  return {
    coordinator: opened[0]!,
    async another() {
      const next = worker();
      opened.push(next);
      return next;
    },
    async close() {
      for (const c of opened) await c.close();
      await database.close();
    },
  };
});

describeStreamBusContract("PostgreSQL", async () => {
  const database: RunsDatabase = await server.database();
  const opened: PostgresStreamBus[] = [];
  const worker = async () => {
    const pool: pg.Pool = database.pool();
    const bus = new PostgresStreamBus({ pool, clientConfig: { connectionString: database.url } });
    opened.push(bus);
    await bus.start();
    return bus;
  };
  return {
    bus: await worker(),
    another: worker,
    async close() {
      for (const bus of opened) await bus.close();
      await database.close();
    },
  };
});
