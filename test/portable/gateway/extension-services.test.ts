import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import { EMPTY_HOST_POLICY, ExtensionData, type ExtensionRuntimeDeps, type ExtensionService } from "../../../src/extension-api/index.ts";
import type { ExtensionDiagnostic } from "../../../src/extensions/diagnostics.ts";
import { HostExtensionRegistry, type LoadedExtensions } from "../../../src/extensions/registry.ts";
import { createGateway } from "../../../src/gateway/app.ts";
import { createExtensionServices, extensionSessionFactory, startExtensionServices } from "../../../src/gateway/extension-services.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { versionedOver } from "../../../src/storage/versioned.ts";
import { config } from "./threads-fixtures.ts";
import { deferred } from "../runtime/runs-fixtures.ts";

/** A service that records what happened to it, in one shared log. */
function recordingService(name: string, log: string[], behaviour: { start?: () => Promise<void>; stop?: () => Promise<void> } = {}): ExtensionService {
  return {
    name,
    async start(deps) {
      log.push(`start ${name}`);
      seenDeps.push(deps);
      await behaviour.start?.();
    },
    async stop() {
      log.push(`stop ${name}`);
      await behaviour.stop?.();
    },
  };
}
const seenDeps: ExtensionRuntimeDeps[] = [];

/** Each service registered by its own extension, `ext-<name>`, through the real registry. */
function servicesOf(...services: ExtensionService[]): LoadedExtensions["services"] {
  const registry = new HostExtensionRegistry();
  for (const service of services) registry.attributedTo(`ext-${service.name}`, (r) => r.service(service));
  return registry.build().services;
}

const deps: ExtensionRuntimeDeps = {
  appStore: new ExtensionData("app"),
  policy: EMPTY_HOST_POLICY,
  sessionFactory: extensionSessionFactory(versionedOver(createMemoryKeyValue())),
};

describe("extension services", () => {
  it("scenario G29: S2's start throws → S1 and S3 start, one diagnostic for S2, and stop runs S3, S2, S1", async () => {
    const log: string[] = [];
    const diagnostics: ExtensionDiagnostic[] = [];
    const services = await startExtensionServices(
      servicesOf(
        recordingService("S1", log),
        recordingService("S2", log, {
          start: async () => {
            throw new Error("port 9000 is taken");
          },
        }),
        recordingService("S3", log),
      ),
      deps,
      { onDiagnostic: (d) => diagnostics.push(d) },
    );

    expect(services.started).toEqual(["S1", "S3"]);
    expect(services.attempted).toEqual(["S1", "S2", "S3"]);
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({ level: "error", source: "ext-S2" });
    expect(diagnostics[0]?.message).toContain("port 9000 is taken");
    expect(diagnostics[0]?.message).toContain("serves without it");

    log.length = 0;
    await services.stop();
    // S2 failed to start but is still stopped: it may hold what it acquired before failing.
    expect(log).toEqual(["stop S3", "stop S2", "stop S1"]);
  });

  it("starts in registration order, each start awaited before the next, all with the same frozen deps", async () => {
    const log: string[] = [];
    const gate = deferred();
    seenDeps.length = 0;
    const services = createExtensionServices(servicesOf(recordingService("A", log, { start: () => gate.promise }), recordingService("B", log)), deps);
    const starting = services.start();
    await Promise.resolve();
    expect(log).toEqual(["start A"]);
    gate.resolve();
    await starting;
    expect(log).toEqual(["start A", "start B"]);
    expect(seenDeps[0]).toBe(seenDeps[1]);
    expect(Object.isFrozen(seenDeps[0])).toBe(true);
    expect(seenDeps[0]).toEqual({ appStore: deps.appStore, policy: deps.policy, sessionFactory: deps.sessionFactory });
  });

  it('"Each receives the same ExtensionRuntimeDeps snapshot containing the app store, projected host policy, and session factory": the gateway\'s services persist through it', async () => {
    const storage = createMemoryKeyValue();
    await storage.setItem("gateway:auth:jwt-secret", "host secret");
    const seen: ExtensionRuntimeDeps[] = [];
    const writer: ExtensionService = {
      name: "writer",
      async start(deps) {
        seen.push(deps);
        const session = deps.sessionFactory("audit");
        const empty = await session.read("cursor");
        expect(empty).toEqual({ value: null, version: null });
        expect(await session.write("cursor", "41", null)).toBe(true);
        const stored = await session.read("cursor");
        expect(await session.write("cursor", "42", stored.version)).toBe(true);
        // Compare-and-set: a write from a stale read is refused, not lost silently.
        expect(await session.write("cursor", "43", stored.version)).toBe(false);
      },
      async stop() {},
    };
    const reader: ExtensionService = {
      name: "reader",
      async start(deps) {
        seen.push(deps);
        // The host's keys are out of reach: a namespace's key never leaves `extensions:<namespace>:`.
        expect((await deps.sessionFactory("gateway").read("auth:jwt-secret")).value).toBeNull();
        expect((await deps.sessionFactory("audit").read("cursor")).value).toBe("42");
      },
      async stop() {},
    };
    const registry = new HostExtensionRegistry();
    registry.attributedTo("ext-persist", (r) => {
      r.service(writer);
      r.service(reader);
    });
    const gateway = await createGateway({ config, storage, extensions: registry.build() });
    try {
      expect(gateway.diagnostics).toEqual([]);
      expect(seen).toHaveLength(2);
      expect(seen[0]).toBe(seen[1]);
      expect(Object.keys(seen[0]!).sort()).toEqual(["appStore", "policy", "sessionFactory"]);
      expect(await storage.getItemRaw("extensions:audit:cursor")).toBe("42");
      expect(await storage.getItem("gateway:auth:jwt-secret")).toBe("host secret");
      expect(() => seen[0]!.sessionFactory("../gateway")).toThrow(/a namespace is 1-128 letters, digits/);
      await expect(seen[0]!.sessionFactory("audit").read("")).rejects.toThrow(/a key must be a non-empty string/);
    } finally {
      await gateway.shutdown();
    }
  });

  it("scenario G30: a hanging stop is abandoned after the 30 s timeout with a 'timed out' diagnostic, and the next stop still runs", async () => {
    const log: string[] = [];
    const diagnostics: ExtensionDiagnostic[] = [];
    const clock = new ManualClock();
    const hangingStopCalled = deferred();
    const services = await startExtensionServices(
      servicesOf(
        recordingService("first", log),
        recordingService("stuck", log, {
          stop: () => {
            hangingStopCalled.resolve();
            return new Promise<void>(() => {});
          },
        }),
      ),
      deps,
      { clock, onDiagnostic: (d) => diagnostics.push(d) },
    );
    log.length = 0;

    let stopped = false;
    const stopping = services.stop().then(() => void (stopped = true));
    await hangingStopCalled.promise;
    await clock.advance(29_999);
    expect(log).toEqual(["stop stuck"]);
    expect(stopped).toBe(false);

    await clock.advance(1);
    await stopping;
    expect(log).toEqual(["stop stuck", "stop first"]);
    expect(diagnostics).toEqual([
      { level: "error", source: "ext-stuck", message: expect.stringContaining("timed out after 30s") },
    ]);
  });

  it("gives every stop its own budget: two hanging stops each get the full timeout", async () => {
    const clock = new ManualClock();
    const diagnostics: ExtensionDiagnostic[] = [];
    const log: string[] = [];
    const hang = () => new Promise<void>(() => {});
    const services = await startExtensionServices(servicesOf(recordingService("a", log, { stop: hang }), recordingService("b", log, { stop: hang })), deps, {
      clock,
      stopTimeoutMs: 1_000,
      onDiagnostic: (d) => diagnostics.push(d),
    });
    log.length = 0;
    const stopping = services.stop();
    await clock.advance(1_000);
    expect(log).toEqual(["stop b", "stop a"]);
    expect(diagnostics.map((d) => d.source)).toEqual(["ext-b"]);
    await clock.advance(999);
    expect(diagnostics).toHaveLength(1);
    await clock.advance(1);
    await stopping;
    expect(diagnostics.map((d) => d.source)).toEqual(["ext-b", "ext-a"]);
  });

  it("reports a failing stop and still stops the services before it", async () => {
    const log: string[] = [];
    const diagnostics: ExtensionDiagnostic[] = [];
    const services = await startExtensionServices(
      servicesOf(
        recordingService("db", log),
        recordingService("cache", log, {
          stop: async () => {
            throw new Error("connection already closed");
          },
        }),
      ),
      deps,
      { onDiagnostic: (d) => diagnostics.push(d) },
    );
    log.length = 0;
    await expect(services.stop()).resolves.toBeUndefined();
    expect(log).toEqual(["stop cache", "stop db"]);
    expect(diagnostics).toEqual([{ level: "error", source: "ext-cache", message: expect.stringMatching(/stop\(\) failed.*connection already closed/) }]);
  });

  it("stop is idempotent: a second call waits for the same pass and stops nothing twice", async () => {
    const log: string[] = [];
    const services = await startExtensionServices(servicesOf(recordingService("one", log)), deps);
    log.length = 0;
    const first = services.stop();
    expect(services.stop()).toBe(first);
    await first;
    await services.stop();
    expect(log).toEqual(["stop one"]);
  });

  it("a service's own abort error is its failure: later services still start", async () => {
    const log: string[] = [];
    const diagnostics: ExtensionDiagnostic[] = [];
    const services = await startExtensionServices(
      servicesOf(
        recordingService("impatient", log, {
          start: async () => {
            throw new DOMException("gave up waiting for the broker", "AbortError");
          },
        }),
        recordingService("after", log),
      ),
      deps,
      { onDiagnostic: (d) => diagnostics.push(d) },
    );
    expect(services.started).toEqual(["after"]);
    expect(diagnostics[0]?.message).toContain("raised its own abort");
  });

  it("the host's abort stops the batch, and stop() still stops the service whose start it interrupted", async () => {
    const log: string[] = [];
    const host = new AbortController();
    const startEntered = deferred();
    const services = createExtensionServices(
      servicesOf(
        recordingService("slow", log, {
          start: () => {
            startEntered.resolve();
            return new Promise<void>(() => {});
          },
        }),
        recordingService("never", log),
      ),
      deps,
    );
    const starting = services.start(host.signal);
    await startEntered.promise;
    host.abort(new Error("shutdown requested"));
    await expect(starting).rejects.toThrow("shutdown requested");
    await services.stop();
    expect(log).toEqual(["start slow", "stop slow"]);
  });

  it("stop() during start prevents later services from starting and stops the one in flight", async () => {
    const log: string[] = [];
    const gate = deferred();
    const services = createExtensionServices(servicesOf(recordingService("first", log, { start: () => gate.promise }), recordingService("second", log)), deps);
    const starting = services.start();
    await Promise.resolve();
    await services.stop();
    gate.resolve();
    await starting;
    expect(log).toEqual(["start first", "stop first"]);
    expect(services.attempted).toEqual(["first"]);
  });

  it("rejects a non-positive stop timeout with a message naming the option", () => {
    expect(() => createExtensionServices([], deps, { stopTimeoutMs: 0 })).toThrow(/stopTimeoutMs/);
  });
});
