import { describe, expect, it } from "vitest";
import { describeAgent, describeMiddleware } from "../../src/agents/assembly-descriptor.ts";
import type { AgentMiddleware } from "../../src/engine/index.ts";
import { hashLongText } from "../../src/extension-api/index.ts";
import { isolateMiddleware } from "../../src/extensions/isolation.ts";

/** A middleware written the way a third party might: configuration in (TS-private) fields, no declaration. */
class AuditTrail implements AgentMiddleware {
  readonly name = "AuditTrail";
  private readonly _level: number;
  private readonly _prompt: string;
  private readonly _client = new (class Client {})();
  readonly #secret = "unreachable";
  readonly targets: string[];
  constructor(level: number, prompt = "audit", targets: string[] = ["journal"]) {
    this._level = level;
    this._prompt = prompt;
    this.targets = targets;
  }
  async wrapModelCall(request: Parameters<NonNullable<AgentMiddleware["wrapModelCall"]>>[0], handler: Parameters<NonNullable<AgentMiddleware["wrapModelCall"]>>[1]) {
    void this.#secret;
    void this._client;
    return handler(request);
  }
}

async function fingerprintWith(middleware: AgentMiddleware): Promise<string> {
  const { fingerprint } = await describeAgent({
    agentName: "lead-agent",
    requestedModel: null,
    effectiveModel: "demo",
    modelParameters: {},
    systemPrompt: "you are helpful",
    tools: [],
    middlewares: [middleware],
    effectivePolicies: {},
  });
  return fingerprint;
}

// Spec (extension-system.md, Agent assembly observation): "a middleware that implements
// release_policy_parameters() owns its own identity, and probing private attributes is the marked
// fallback for the ones that do not."
describe("assembly descriptor: probing is the marked fallback for middlewares without releasePolicyParameters()", () => {
  it("probing private attributes is the marked fallback: fields are read and the descriptor says probed: true", async () => {
    const long = "x".repeat(300);
    expect(describeMiddleware(new AuditTrail(3, long))).toEqual({
      name: "AuditTrail",
      module: "deerflow-edge/middlewares/audit-trail",
      extension: null,
      // The client instance and the #private field are not configuration the host can read or compare.
      policy_parameters: { _level: 3, _prompt: await hashLongText(long), targets: ["journal"] },
      probed: true,
    });
  });

  it("a middleware that implements releasePolicyParameters() owns its own identity: no probe, no marker", () => {
    const declared = Object.assign(new AuditTrail(3), { releasePolicyParameters: () => ({ level: "declared" }) });
    const described = describeMiddleware(declared);
    expect(described.policy_parameters).toEqual({ level: "declared" });
    expect(described).not.toHaveProperty("probed");
  });

  it("a probed field change moves the fingerprint, so an undeclared policy change is not hidden", async () => {
    expect(await fingerprintWith(new AuditTrail(3))).not.toBe(await fingerprintWith(new AuditTrail(4)));
    expect(await fingerprintWith(new AuditTrail(3, "a", ["journal"]))).not.toBe(await fingerprintWith(new AuditTrail(3, "a", ["journal", "siem"])));
    expect(await fingerprintWith(new AuditTrail(3))).toBe(await fingerprintWith(new AuditTrail(3)));
  });

  it("a contributed middleware is probed through its isolation wrapper and keeps its extension", () => {
    const wrapped = isolateMiddleware(new AuditTrail(5), { source: "acme-audit", name: "extension_acme-audit_AuditTrail_0", onDiagnostic: () => {} });
    expect(describeMiddleware(wrapped)).toMatchObject({ name: "AuditTrail", extension: "acme-audit", policy_parameters: { _level: 5 }, probed: true });
  });

  it("a throwing getter or a cycle in a field is skipped, never thrown out of the assembly", () => {
    const cyclic: Record<string, unknown> = { depth: 1 };
    cyclic.self = cyclic;
    const odd = {
      name: "Odd",
      cyclic,
      ratio: Number.NaN,
      get broken(): number {
        throw new Error("no");
      },
      beforeModel: () => undefined,
    } as unknown as AgentMiddleware;
    expect(describeMiddleware(odd)).toEqual({ name: "Odd", module: "deerflow-edge/middlewares/odd", extension: null, policy_parameters: { cyclic: { depth: 1 } }, probed: true });
  });
});
