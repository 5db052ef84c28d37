import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/config/errors.ts";
import { ExtensionApiError } from "../../../src/extension-api/errors.ts";
import { errorResponse, INTERNAL_ERROR_DETAIL, statusOfError, statusOfRunOperation, type GatewayLogger } from "../../../src/gateway/errors.ts";
import { ModelError } from "../../../src/models/errors.ts";
import { ModuleLoaderError } from "../../../src/ports/module-loader.ts";
import { SandboxError } from "../../../src/ports/sandbox.ts";
import { RunOperationError, type RunOperationErrorCode } from "../../../src/runtime/runs/types.ts";

const quiet: GatewayLogger = { error: () => {}, warn: () => {}, info: () => {} };

/** The codes of each status a run-operation refusal was answered with when the error carried its status itself. */
const ANSWERED_WITH: Readonly<Record<number, readonly RunOperationErrorCode[]>> = {
  400: ["unknown_model", "invalid_last_event_id", "invalid_input_message"],
  404: ["run_not_found", "assistant_not_found"],
  409: ["thread_busy", "run_conflict", "run_not_active", "run_not_cancellable", "run_active"],
  422: ["invalid_run_request", "server_owned_state", "invalid_query", "invalid_thread_id", "invalid_run_id"],
  503: ["shutting_down"],
};
const ANSWERED = Object.entries(ANSWERED_WITH).flatMap(([status, codes]) => codes.map((code) => [code, Number(status)] as const));

describe("the gateway picks a status from an error's code", () => {
  it("answers every run-operation refusal with the status it had when it carried one, its message and its code", async () => {
    expect(new Set(ANSWERED.map(([code]) => code)).size).toBe(16); // every RunOperationErrorCode, once
    for (const [code, status] of ANSWERED) {
      const error = new RunOperationError(code, `refused: ${code}`);
      expect(statusOfRunOperation(error), code).toBe(status);
      expect(statusOfError(error), code).toBe(status);
      const response = errorResponse(error, { logger: quiet });
      expect(response.status, code).toBe(status);
      // A 5xx never shows its message outside a route that answers it itself (the runs routes do).
      expect(await response.json()).toEqual(status >= 500 ? { detail: INTERNAL_ERROR_DETAIL } : { detail: `refused: ${code}`, code });
    }
  });

  it("answers a lower floor's error that no route raises on purpose as an internal error, as before it joined the root", async () => {
    const logged: string[] = [];
    const logger: GatewayLogger = { ...quiet, error: (message) => void logged.push(message) };
    const unplanned = [
      new ConfigError("config_invalid", "config.yaml", [{ path: "models", message: "expected a list" }]),
      new ModelError("the provider is unreachable at http://10.0.0.5", { code: "provider_unreachable" }),
      new SandboxError("sandbox_unavailable", "the sandbox worker died"),
      new ModuleLoaderError("module_not_found", "nothing at ./audit.ts"),
      new ExtensionApiError("invalid_text", "not a string"),
    ];
    for (const error of unplanned) {
      expect(statusOfError(error), error.name).toBe(500);
      const response = errorResponse(error, { logger });
      expect(response.status, error.name).toBe(500);
      expect(await response.json()).toEqual({ detail: INTERNAL_ERROR_DETAIL });
    }
    expect(logged).toHaveLength(unplanned.length);
  });
});
