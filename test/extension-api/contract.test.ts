import { describe, expect, it } from "vitest";
import {
  API_VERSION,
  EMPTY_HOST_POLICY,
  EXTENSION_TASK_STORE_KEY,
  ExtensionData,
  ExtensionPermissionError,
  REGISTRATION_METHODS,
  acceptedRange,
  dataKey,
  extension,
  hostPolicySnapshot,
  isCompatibleVersion,
  requiredHostRange,
  requireAdmin,
  resolvePrincipal,
  systemModelRequest,
  taskInfo,
  taskStoreFrom,
  type ExtensionRegistry,
} from "../../src/extension-api/index.ts";

describe("contract version", () => {
  it("is 0.1.2", () => {
    expect(API_VERSION).toBe("0.1.2");
  });

  it("scenario G7: host 0.1.2 accepts 0.1, 0.1.2 and refuses 0.1.3, 0.2, 1.0", () => {
    expect(isCompatibleVersion("0.1.2", "0.1")).toBe(true);
    expect(isCompatibleVersion("0.1.2", "0.1.0")).toBe(true);
    expect(isCompatibleVersion("0.1.2", "0.1.2")).toBe(true);
    expect(isCompatibleVersion("0.1.2", "0.1.3")).toBe(false);
    expect(isCompatibleVersion("0.1.2", "0.2")).toBe(false);
    expect(isCompatibleVersion("0.1.2", "0.0.9")).toBe(false);
    expect(isCompatibleVersion("0.1.2", "1.0")).toBe(false);
    expect(isCompatibleVersion("0.1.2", "0")).toBe(false);
  });

  it("from 1.0 on, any older minor of the same major is accepted", () => {
    expect(isCompatibleVersion("1.3", "1")).toBe(true);
    expect(isCompatibleVersion("1.3.0", "1.2.7")).toBe(true);
    expect(isCompatibleVersion("1.3", "1.4")).toBe(false);
    expect(isCompatibleVersion("2.0", "1.9")).toBe(false);
  });

  it("refuses anything that is not a dotted numeric string", () => {
    for (const declared of ["", "v0.1", "0.1-beta", "0..1", " 0.1", "0.1."]) {
      expect(isCompatibleVersion("0.1.2", declared)).toBe(false);
    }
    expect(isCompatibleVersion("0.1.2", 42 as unknown as string)).toBe(false);
  });

  it("names the accepted window npm-style", () => {
    expect(acceptedRange("0.1.2")).toBe(">=0.1.0 <0.2.0");
    expect(acceptedRange("1.3")).toBe(">=1.0.0 <2.0.0");
    expect(requiredHostRange("0.2")).toBe(">=0.2.0 <0.3.0");
    expect(() => acceptedRange("x")).toThrow(expect.objectContaining({ code: "invalid_api_version" }));
  });
});

describe("extension()", () => {
  it("stamps the declared api and name on the install function itself", () => {
    const install = (registry: ExtensionRegistry) => void registry;
    const declared = extension({ api: "0.1", name: "audit" })(install);
    expect(declared).toBe(install);
    expect(declared.deerflowApi).toBe("0.1");
    expect(declared.deerflowName).toBe("audit");
  });

  it("refuses a malformed version at stamp time", () => {
    expect(() => extension({ api: "latest" })).toThrow(expect.objectContaining({ code: "invalid_api_version" }));
  });

  it("the registry contract has exactly seven registration methods", () => {
    expect(REGISTRATION_METHODS).toEqual([
      "middlewares",
      "taskLifecycle",
      "systemModelObserver",
      "agentAssemblyObserver",
      "contextCompactionObserver",
      "service",
      "routers",
    ]);
  });
});

describe("HostPolicySnapshot", () => {
  it("is frozen, budget off by default, and keeps only numeric limits", () => {
    expect(EMPTY_HOST_POLICY).toEqual({ tokenBudgetEnabled: false });
    const policy = hostPolicySnapshot({ tokenBudgetEnabled: true, maxInputTokens: 1000, maxOutputTokens: null, maxSubagentsPerRun: "3" });
    expect(policy).toEqual({ tokenBudgetEnabled: true, maxInputTokens: 1000 });
    expect("maxOutputTokens" in policy).toBe(false);
    expect(Object.isFrozen(policy)).toBe(true);
  });
});

describe("ExtensionData", () => {
  const counter = dataKey<{ n: number }>("counter");

  it("keys by token identity, not by description", () => {
    const store = new ExtensionData("app");
    const other = dataKey<{ n: number }>("counter");
    store.set(counter, { n: 1 });
    expect(store.get(counter)).toEqual({ n: 1 });
    expect(store.get(other)).toBeUndefined();
    expect(store.scopeId).toBe("app");
  });

  it("getOrInit runs init once, may re-enter the store, and treats null as absent", () => {
    const store = new ExtensionData("run-1");
    const base = dataKey<number>("base");
    let calls = 0;
    const made = store.getOrInit(counter, () => {
      calls += 1;
      return { n: store.getOrInit(base, () => 41) + 1 };
    });
    expect(made).toEqual({ n: 42 });
    expect(store.getOrInit(counter, () => ({ n: 0 }))).toBe(made);
    expect(calls).toBe(1);
    store.set(base, null as unknown as number);
    expect(store.get(base)).toBeUndefined();
    expect(store.remove(counter)).toBe(made);
    expect(store.get(counter)).toBeUndefined();
  });

  it("getOrInit refuses an init that asks for its own key", () => {
    const store = new ExtensionData("app");
    const selfish = dataKey<number>("selfish");
    expect(() => store.getOrInit(selfish, () => store.getOrInit(selfish, () => 1))).toThrow(
      expect.objectContaining({ code: "extension_data_cycle" }),
    );
  });

  it("taskStoreFrom finds the store only under the host key", () => {
    const store = new ExtensionData("run-1");
    expect(EXTENSION_TASK_STORE_KEY).toBe("__deerflow_extension_task_store");
    expect(taskStoreFrom({ context: { [EXTENSION_TASK_STORE_KEY]: store } })).toBe(store);
    expect(taskStoreFrom({ context: new Map([[EXTENSION_TASK_STORE_KEY, store]]) })).toBe(store);
    expect(taskStoreFrom({ context: { [EXTENSION_TASK_STORE_KEY]: { scopeId: "fake" } } })).toBeUndefined();
    expect(taskStoreFrom({ context: null })).toBeUndefined();
    expect(taskStoreFrom(undefined)).toBeUndefined();
  });
});

describe("system model requests and task info", () => {
  it("keeps a prompt string whole as a one-element frozen array", () => {
    const request = systemModelRequest({ messages: "Summarise: a, b, c", modelName: "m" });
    expect(request.messages).toEqual(["Summarise: a, b, c"]);
    expect(Object.isFrozen(request.messages)).toBe(true);
    expect(request.modelName).toBe("m");
  });

  it("copies an array so later changes by the call site do not show", () => {
    const messages: unknown[] = [{ role: "user", content: "hi" }];
    const request = systemModelRequest({ messages });
    messages.push("later");
    expect(request.messages).toHaveLength(1);
    expect(systemModelRequest().messages).toEqual([]);
    expect(systemModelRequest({ messages: 7 }).messages).toEqual([7]);
  });

  it("taskInfo is frozen and defaults resumed to false", () => {
    const info = taskInfo({ taskId: "r1", runId: "r1", threadId: "t1", kind: "lead" });
    expect(info.resumed).toBe(false);
    expect(Object.isFrozen(info)).toBe(true);
  });
});

describe("principal helpers", () => {
  const user = { userId: "u1", isAdmin: false, isInternal: false, roles: ["user"] };

  it("resolvePrincipal returns a frozen projection of the caller", () => {
    const principal = resolvePrincipal({ principal: user });
    expect(principal).toEqual(user);
    expect(Object.isFrozen(principal)).toBe(true);
  });

  it("fails closed with code forbidden when identity is missing or malformed", () => {
    for (const ctx of [undefined, null, { principal: null }, { principal: { ...user, userId: "" } }, { principal: { ...user, roles: "admin" } }]) {
      expect(() => resolvePrincipal(ctx as never)).toThrow(ExtensionPermissionError);
      expect(() => requireAdmin(ctx as never)).toThrow(expect.objectContaining({ code: "forbidden" }));
    }
  });

  it("requireAdmin admits only a strict isAdmin === true", () => {
    expect(() => requireAdmin({ principal: user })).toThrow(expect.objectContaining({ code: "forbidden" }));
    expect(() => requireAdmin({ principal: { ...user, isAdmin: "true" } as never })).toThrow(ExtensionPermissionError);
    expect(requireAdmin({ principal: { ...user, isAdmin: true } }).userId).toBe("u1");
  });
});
