import { MemoryStreamBridge } from "../../../src/runtime/runs/stream-bridge.ts";
import { describeStreamBusContract } from "./stream-bus-contract.ts";

// One process: there is no second bus over the same backend, so the cross-process case runs on one.
describeStreamBusContract("MemoryStreamBridge", async () => {
  const bus = new MemoryStreamBridge();
  return { bus, close: () => bus.close() };
});
