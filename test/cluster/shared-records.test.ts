// Issue 15, point 4: the records several workers write, across the cluster with session sign-in on.
// One JWT secret for the deployment (a session signed in on one worker is valid on the others);
// failed sign-ins counted across workers, not per worker; memory extractions of one user on
// several workers at once keep every fact. The official checkpoint conformance suite on the
// PostgreSQL saver is the postgres driver's own, in the checkpoint pass (vitest.checkpoint.config.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashPassword } from "../../src/gateway/auth/password.ts";
import { startCluster, stopCluster, type Cluster } from "./harness.ts";
import { api, isTerminal, pool, waitForRun, type RunRow } from "./drive.ts";
import { scriptedInput } from "./scripted-model.ts";

const PASSWORD = "pw-cluster-u1-secret";
let cluster: Cluster;

beforeAll(async () => {
  const users = await Promise.all(
    ["u1", "u2"].map(async (id) => ({ id, password_hash: await hashPassword(PASSWORD, { iterations: 1_000 }), role: "user" })),
  );
  cluster = await startCluster({
    config: {
      gateway: { auth: { mode: "session", users } },
      memory: { enabled: true, injection_enabled: true, debounce_seconds: 1 },
    },
  });
});
afterAll(async () => {
  await stopCluster(cluster);
});

interface Session {
  readonly headers: Record<string, string>;
}

async function login(username: string, password: string, worker: number): Promise<{ status: number; session?: Session }> {
  const response = await api(cluster, "/v1/auth/login/local", { method: "POST", worker, body: JSON.stringify({ username, password }) });
  await response.text();
  if (response.status !== 200) return { status: response.status };
  const cookies = new Map(response.headers.getSetCookie().map((c) => c.split(";")[0]!.split("=") as [string, string]));
  const cookie = [...cookies].map(([name, value]) => `${name}=${value}`).join("; ");
  return { status: 200, session: { headers: { cookie, "X-CSRF-Token": cookies.get("csrf_token") ?? "" } } };
}

describe("records shared by the workers (session sign-in on)", () => {
  it("a session signed in on one worker is valid on every worker: one JWT secret for the deployment", async () => {
    const { status, session } = await login("u2", PASSWORD, 0);
    expect(status).toBe(200);
    for (const worker of [0, 1, 2]) {
      const me = await api(cluster, "/v1/auth/me", { worker, headers: session!.headers });
      expect(me.status, `worker ${worker}`).toBe(200);
      expect(((await me.json()) as { id: string }).id).toBe("u2");
    }
  });

  it("failed sign-ins spread over the workers are counted once for the account: after 5 the right password is refused too", async () => {
    const answers: number[] = [];
    for (let i = 0; i < 5; i++) answers.push((await login("u1", "wrong-password", i % 3)).status);
    // No worker saw more than two of them, so only a count shared by the workers refuses any.
    expect(answers.slice(0, 3)).toEqual([401, 401, 401]);
    expect(answers.slice(3)).toEqual([429, 429]);
    const right = await login("u1", PASSWORD, 2);
    expect(right.status).toBe(429);
  });

  it("memory extractions for one user on all three workers at once keep every fact", async () => {
    const { session } = await login("u2", PASSWORD, 1);
    const facts = Array.from({ length: 9 }, (_, i) => `fact ${i} is the colour ${["red", "green", "blue"][i % 3]} number ${i * 7}`);
    const threads = await pool(facts, 9, async (_, i) => {
      const response = await api(cluster, "/threads", { method: "POST", worker: i % 3, headers: session!.headers, body: "{}" });
      expect(response.status, await response.clone().text()).toBe(200);
      return ((await response.json()) as { thread_id: string }).thread_id;
    });
    const runs = await Promise.all(
      facts.map(async (fact, i) => {
        const response = await api(cluster, `/threads/${threads[i]}/runs`, {
          method: "POST",
          worker: i % 3,
          headers: session!.headers,
          body: JSON.stringify({ assistant_id: "lead_agent", input: scriptedInput({ steps: 0, text: `Remember that ${fact}.` }) }),
        });
        expect(response.status, await response.clone().text()).toBe(200);
        return (await response.json()) as RunRow;
      }),
    );
    for (const run of runs) {
      const row = await waitForRun(cluster, run.thread_id, run.run_id, isTerminal, 60_000, session!.headers);
      expect(row.status).toBe("success");
    }
    // Past every debounce (1 s) and its write.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    for (const worker of [0, 1, 2]) {
      const marker = `what do you know, worker ${worker}`;
      const created = await api(cluster, "/threads", { method: "POST", worker, headers: session!.headers, body: "{}" });
      const threadId = ((await created.json()) as { thread_id: string }).thread_id;
      const response = await api(cluster, `/threads/${threadId}/runs/wait`, {
        method: "POST",
        worker,
        headers: session!.headers,
        body: JSON.stringify({ assistant_id: "lead_agent", input: scriptedInput({ steps: 0, text: marker }) }),
      });
      expect(response.status, await response.clone().text()).toBe(200);
      await response.text();
      const prompt = cluster.model.promptsFor(marker).join("\n");
      const missing = facts.filter((fact) => !prompt.includes(fact));
      expect(missing, `facts injected on worker ${worker}`).toEqual([]);
    }
  });
});
