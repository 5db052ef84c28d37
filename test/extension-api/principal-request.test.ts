import { afterEach, describe, expect, it } from "vitest";
import {
  ExtensionPermissionError,
  installPrincipalResolver,
  requireAdmin,
  resolvePrincipal,
  type ExtensionPrincipal,
} from "../../src/extension-api/index.ts";

/*
 * The Request form of the principal helpers: an extension handler that only kept the Request can
 * still ask who is calling, through the resolver the host installs before mounting routers.
 */

const SLOT = Symbol.for("deerflow.extension.principalResolver");
const alice: ExtensionPrincipal = { userId: "alice", isAdmin: false, isInternal: false, roles: ["user"] };
const root: ExtensionPrincipal = { userId: "root", isAdmin: true, isInternal: false, roles: ["admin"] };

const undo: (() => void)[] = [];
function install(resolver: Parameters<typeof installPrincipalResolver>[0]): void {
  undo.push(installPrincipalResolver(resolver));
}
afterEach(() => {
  while (undo.length > 0) undo.pop()?.();
});

function request(path = "/api/ext/x"): Request {
  return new Request(`http://gateway.test${path}`);
}

describe("resolvePrincipal(request) / requireAdmin(request)", () => {
  it("answers from the installed resolver for the very Request it knows", () => {
    const known = request();
    const callers = new Map<Request, ExtensionPrincipal>([[known, alice]]);
    install((r) => callers.get(r) ?? null);
    const principal = resolvePrincipal(known);
    expect(principal).toEqual(alice);
    expect(Object.isFrozen(principal)).toBe(true);
    expect(() => resolvePrincipal(request())).toThrow(ExtensionPermissionError);
  });

  it("fails closed with no resolver installed", () => {
    expect((globalThis as Record<symbol, unknown>)[SLOT]).toBeUndefined();
    expect(() => resolvePrincipal(request())).toThrow(expect.objectContaining({ code: "forbidden" }));
    expect(() => requireAdmin(request())).toThrow(ExtensionPermissionError);
  });

  it("fails closed when the resolver throws or returns a malformed principal", () => {
    install(() => {
      throw new Error("session store unavailable");
    });
    expect(() => resolvePrincipal(request())).toThrow(ExtensionPermissionError);
    install(() => ({ userId: "mallory", isAdmin: "true", isInternal: false, roles: [] }) as never);
    expect(resolvePrincipal(request()).isAdmin).toBe(false);
    expect(() => requireAdmin(request())).toThrow(/not an administrator/);
    install(() => ({ userId: "", isAdmin: true, isInternal: false, roles: [] }));
    expect(() => requireAdmin(request())).toThrow(ExtensionPermissionError);
  });

  it("requireAdmin(request) admits an administrator only", () => {
    const admin = request("/admin");
    install((r) => (r === admin ? root : alice));
    expect(requireAdmin(admin).userId).toBe("root");
    expect(() => requireAdmin(request())).toThrow('user "alice" is not an administrator');
  });

  it("lives on a registered global symbol, so a second copy of the contract finds the same resolver", () => {
    const known = request();
    install((r) => (r === known ? alice : null));
    const resolver = (globalThis as Record<symbol, (r: Request) => unknown>)[SLOT];
    expect(typeof resolver).toBe("function");
    expect(resolver?.(known)).toEqual(alice);
  });

  it("recognises a Request from another realm by its shape", () => {
    const foreign = { url: "http://gateway.test/x", method: "GET", headers: new Headers() } as unknown as Request;
    install((r) => (r === foreign ? alice : null));
    expect(resolvePrincipal(foreign).userId).toBe("alice");
  });

  it("undo restores the previous resolver, and leaves a newer one alone", () => {
    const first = () => alice;
    const second = () => root;
    const undoFirst = installPrincipalResolver(first);
    const undoSecond = installPrincipalResolver(second);
    undoFirst();
    expect(resolvePrincipal(request()).userId).toBe("root");
    undoSecond();
    expect(resolvePrincipal(request()).userId).toBe("alice");
    undoFirst();
    expect(() => resolvePrincipal(request())).toThrow(ExtensionPermissionError);
  });

  it("the context form still wins over a resolver: ctx.principal is what the host passed", () => {
    install(() => root);
    expect(resolvePrincipal({ principal: alice }).userId).toBe("alice");
    expect(() => resolvePrincipal({ principal: null })).toThrow(ExtensionPermissionError);
  });

  it("refuses a non-function resolver", () => {
    expect(() => installPrincipalResolver("nope" as never)).toThrow(/takes a function/);
  });
});
