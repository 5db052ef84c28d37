import { afterEach, describe, expect, it } from "vitest";
import type { SandboxProvider } from "../../src/ports/sandbox.ts";
import { captureWorkspace, compareWorkspaces, unifiedDiff, verifyRunDelivery, workspaceChangesProbe, type WorkspaceFileChange } from "../../src/runtime/workspace-changes.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";

const scope = { userId: "u1", threadId: "t1" };
let provider: SandboxProvider;

afterEach(async () => {
  await provider?.close();
});

describe("workspace changes", () => {
  it("sees creations, same-size rewrites and deletions in workspace and outputs; tool-result spills and tooling folders are left out", async () => {
    provider = createVirtualSandboxProvider();
    const sandbox = await provider.acquire(scope);
    await sandbox.writeFile("/mnt/user-data/workspace/keep.txt", "same\n");
    await sandbox.writeFile("/mnt/user-data/workspace/edit.txt", "one\ntwo\nthree\n");
    await sandbox.writeFile("/mnt/user-data/outputs/old.txt", "bye\n");
    const before = await captureWorkspace(sandbox);

    await sandbox.writeFile("/mnt/user-data/workspace/edit.txt", "one\nTWO\nthree\n"); // same size
    await sandbox.remove("/mnt/user-data/outputs/old.txt");
    await sandbox.writeFile("/mnt/user-data/outputs/report.md", "# Report\n");
    await sandbox.writeFile("/mnt/user-data/outputs/.tool-results/bash-1.txt", "spilled output\n");
    await sandbox.writeFile("/mnt/user-data/outputs/custom-spill/x.txt", "spilled\n");
    await sandbox.writeFile("/mnt/user-data/workspace/node_modules/pkg/index.js", "x\n");
    await sandbox.writeFile("/mnt/user-data/workspace/.env", "API_KEY=abc\n");
    await sandbox.writeFileBytes("/mnt/user-data/outputs/chart.bin", new Uint8Array([0, 1, 2, 0]));
    const changes = compareWorkspaces(before, await captureWorkspace(sandbox, { toolResultsDirname: "custom-spill" }));

    const byPath = Object.fromEntries(changes.files.map((file) => [file.path, file]));
    expect(Object.keys(byPath).sort()).toEqual([
      "/mnt/user-data/outputs/chart.bin",
      "/mnt/user-data/outputs/old.txt",
      "/mnt/user-data/outputs/report.md",
      "/mnt/user-data/workspace/.env",
      "/mnt/user-data/workspace/edit.txt",
    ]);
    expect(changes.summary).toEqual({ created: 3, modified: 1, deleted: 1, symlink_created: 0, additions: 2, deletions: 2, truncated: false });
    expect(byPath["/mnt/user-data/workspace/edit.txt"]).toMatchObject({ status: "modified", root: "workspace", additions: 1, deletions: 1 });
    expect(byPath["/mnt/user-data/workspace/edit.txt"]!.diff).toBe(
      "--- a/mnt/user-data/workspace/edit.txt\n+++ b/mnt/user-data/workspace/edit.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three",
    );
    expect(byPath["/mnt/user-data/outputs/old.txt"]).toMatchObject({ status: "deleted", root: "outputs", size_after: null, deletions: 1 });
    // Secrets and binaries are listed, their content never shown.
    expect(byPath["/mnt/user-data/workspace/.env"]).toMatchObject({ sensitive: true, diff: "", diff_unavailable_reason: "sensitive" });
    expect(byPath["/mnt/user-data/outputs/chart.bin"]).toMatchObject({ binary: true, diff: "", diff_unavailable_reason: "binary" });
  });

  it("a unified diff keeps 3 lines of context and splits distant changes into hunks", () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join("\n") + "\n";
    const after = before.replace("line 2\n", "line two\n").replace("line 19\n", "line nineteen\n");
    const { diff, additions, deletions } = unifiedDiff("/f", before, after);
    expect([additions, deletions]).toEqual([2, 2]);
    expect(diff.split("\n").filter((line) => line.startsWith("@@"))).toEqual(["@@ -1,5 +1,5 @@", "@@ -16,5 +16,5 @@"]);
  });

  it("the probe leaves the sandbox released, as a run does", async () => {
    provider = createVirtualSandboxProvider();
    const finish = await workspaceChangesProbe(provider)(scope);
    const sandbox = await provider.acquire(scope);
    await sandbox.writeFile("/mnt/user-data/outputs/a.txt", "a\n");
    await provider.release(sandbox.id);
    const changes = await finish();
    expect(changes).toMatchObject({ type: "workspace_changes", summary: { created: 1 } });
    const again = await provider.acquire(scope);
    expect(again).not.toBe(sandbox);
    expect(await again.readFile("/mnt/user-data/outputs/a.txt")).toBe("a\n");
  });
});

// Spec, middleware-chain.md item 2 (ToolOutputBudgetMiddleware): "those files are process
// feedback, so the workspace-changes scanner excludes that directory and run delivery
// verification never counts them as produced artifacts".
describe("run delivery verification", () => {
  const change = (path: string, status: WorkspaceFileChange["status"]) => ({ path, status }) as WorkspaceFileChange;

  it('"run delivery verification never counts them as produced artifacts": .tool-results (and a configured storage folder) are neither produced nor presented', () => {
    const files = [
      change("/mnt/user-data/outputs/report.md", "created"),
      change("/mnt/user-data/outputs/chart.png", "modified"),
      change("/mnt/user-data/outputs/old.md", "deleted"),
      change("/mnt/user-data/workspace/draft.md", "created"),
      change("/mnt/user-data/outputs/.tool-results/bash-0123456789ab.log", "created"),
      change("/mnt/user-data/outputs/nested/.tool-results/x.txt", "modified"),
      change("/mnt/user-data/outputs/spill/web_fetch-0123456789ab.log", "created"),
    ];
    const presented = ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/.tool-results/bash-0123456789ab.log", "/mnt/user-data/outputs/report.md"];
    expect(verifyRunDelivery({ files }, presented, { toolResultsDirname: "spill" })).toEqual({
      produced_paths: ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/chart.png"],
      presented_paths: ["/mnt/user-data/outputs/report.md"],
      matched_paths: ["/mnt/user-data/outputs/report.md"],
      satisfied: true,
    });
  });

  it("is satisfied when the run produced nothing under outputs but its spilled tool output, and not when it produced a file it never presented", () => {
    const spillOnly = [change("/mnt/user-data/outputs/.tool-results/bash-0123456789ab.log", "created"), change("/mnt/user-data/workspace/notes.md", "created")];
    expect(verifyRunDelivery({ files: spillOnly }, [])).toMatchObject({ produced_paths: [], satisfied: true });
    const unpresented = [change("/mnt/user-data/outputs/report.md", "created")];
    expect(verifyRunDelivery({ files: unpresented }, [])).toMatchObject({ produced_paths: ["/mnt/user-data/outputs/report.md"], matched_paths: [], satisfied: false });
  });

  it("the probe, given the thread's presented files, journals the check beside the changes", async () => {
    provider = createVirtualSandboxProvider();
    const finish = await workspaceChangesProbe(provider, { presented: async () => ["/mnt/user-data/outputs/report.md"] })(scope);
    const sandbox = await provider.acquire(scope);
    await sandbox.writeFile("/mnt/user-data/outputs/report.md", "# Report\n");
    await sandbox.writeFile("/mnt/user-data/outputs/.tool-results/bash-0123456789ab.log", "spilled\n");
    await provider.release(sandbox.id);
    const recorded = await finish();
    expect(recorded.delivery).toEqual({
      produced_paths: ["/mnt/user-data/outputs/report.md"],
      presented_paths: ["/mnt/user-data/outputs/report.md"],
      matched_paths: ["/mnt/user-data/outputs/report.md"],
      satisfied: true,
    });
    expect(await workspaceChangesProbe(provider)(scope).then((done) => done())).not.toHaveProperty("delivery");
  });
});
