import { AIMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentTool } from "../../../src/engine/types.ts";
import type { GatewayUser } from "../../../src/gateway/types.ts";
import { createLLMErrorHandlingMiddleware, LLM_RUN_FAILURE_NAME } from "../../../src/middlewares/llm-error-handling/index.ts";
import { createTerminalResponseMiddleware } from "../../../src/middlewares/terminal-response/terminal-response.ts";
import { runRequest, type RunAgentFactory } from "../../../src/runtime/runs/types.ts";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { human, runsHarness } from "./runs-harness.ts";

/*
 * A run whose graph finishes but whose answer is a fallback stands in for an answer the model
 * could not give: LLMErrorHandling after a provider failure, TerminalResponse after a second empty
 * reply following tool results. Spec (middleware-chain.md, TerminalResponseMiddleware): "a second
 * empty response is replaced in checkpoint state by a visible error fallback marked for the run
 * worker, so the run finishes as an error instead of a silent success"; LLMErrorHandling's
 * fallback after a provider failure is marked the same way.
 * Pinned here through the worker (RunManager) and through the gateway's run routes.
 */

class ProviderError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(message: string, fields: { status: number; code: string }) {
    super(message);
    this.status = fields.status;
    this.code = fields.code;
  }
}

const lookup: AgentTool = {
  name: "lookup_status",
  description: "Return a deterministic tool result.",
  schema: { type: "object", properties: {} },
  invoke: async () => "tool completed",
};

type Scenario = "provider_failure" | "empty_after_tools";

/** A fresh scripted model per run: the provider refuses, or answers empty twice after a tool. */
function factory(scenario: Scenario, checkpointer: BaseCheckpointSaver): RunAgentFactory {
  return async () => {
    const model =
      scenario === "provider_failure"
        ? fakeModel().respond(new ProviderError("insufficient_quota: account balance is empty", { status: 429, code: "insufficient_quota" }))
        : fakeModel().respondWithTools([{ name: "lookup_status", args: {}, id: "call-1" }]).respond(new AIMessage("")).respond(new AIMessage(""));
    const middlewares: AgentMiddleware[] =
      scenario === "provider_failure" ? [createLLMErrorHandlingMiddleware()] : [createTerminalResponseMiddleware()];
    return createAgent({
      name: "lead-agent",
      model,
      tools: [lookup],
      middlewares,
      services: { clock: scenario === "provider_failure" ? new ManualClock(0) : systemClock },
      checkpointer,
    });
  };
}

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

const ALICE: GatewayUser = {
  id: "alice",
  systemRole: "user",
  authSource: "api_key",
  isInternal: false,
  permissions: new Set(),
};

describe("a run that ends in a fallback answer has status error", () => {
  for (const scenario of ["provider_failure", "empty_after_tools"] as const) {
    it(`${scenario}: the worker records status error with the LLMError reason, and the thread is left in error`, async () => {
      let checkpointer!: BaseCheckpointSaver;
      const gw = runsHarness({ agentFactory: (request) => factory(scenario, checkpointer)(request) });
      checkpointer = gw.checkpointer;
      const tid = await gw.thread();
      const created = await gw.runs.create(tid, runRequest({ input: { messages: [{ type: "human", content: "Check the status" }] } }), ALICE);
      const finished = await gw.runs.join(tid, created.run_id);
      expect(finished.status).toBe("error");
      expect(finished.error).toMatchObject({ name: LLM_RUN_FAILURE_NAME });
      if (scenario === "provider_failure") expect(finished.error?.message).toContain("insufficient_quota");
      expect((await gw.runs.get(tid, created.run_id))?.status).toBe("error");
      expect(await gw.threads.get(tid)).toMatchObject({ status: "error" });
    });

    it(`${scenario}: over HTTP the run reads back as status error, and its journal ends with run.error`, async () => {
      let checkpointer!: BaseCheckpointSaver;
      const gw = runsHarness({ agentFactory: (request) => factory(scenario, checkpointer)(request) });
      checkpointer = gw.checkpointer;
      const tid = await gw.thread();
      const waited = await gw.request("POST", `/api/threads/${tid}/runs/wait`, human("Check the status"));
      expect(waited.status).toBe(200);
      // runs/wait answers a failed run with LangGraph's error envelope, as for a run that threw.
      expect(await json(waited)).toMatchObject({ __error__: { error: LLM_RUN_FAILURE_NAME } });

      const listed = (await (await gw.request("GET", `/api/threads/${tid}/runs`)).json()) as Array<Record<string, unknown>>;
      expect(listed).toHaveLength(1);
      const runId = String(listed[0]!.run_id);
      const run = await json(await gw.request("GET", `/api/threads/${tid}/runs/${runId}`));
      expect(run).toMatchObject({ run_id: runId, status: "error" });
      const events = (await (await gw.request("GET", `/api/threads/${tid}/runs/${runId}/events`)).json()) as Array<{ event_type: string }>;
      expect(events.map((event) => event.event_type).filter((type) => type.startsWith("run."))).toContain("run.error");
      expect(events.map((event) => event.event_type)).not.toContain("run.success");
    });
  }
});
