export {
  DEMO_INSPECT_COMMAND,
  DEMO_MODEL_MARKER,
  DEMO_NOTES_PATH,
  DEMO_WORKSPACE,
  DemoChatModel,
  type DemoChatModelCallOptions,
  type DemoChatModelFields,
} from "./demo.ts";
export { LEAD_CALLER, REPLAY_MODEL_MARKER, REPLAY_PROVIDER, ReplayChatModel, replayCaller, type ReplayChatModelFields } from "./replay.ts";
export { ScriptedChatModel, stableHash, type ScriptedChatModelCallOptions, type ScriptedChatModelFields, type ScriptedTurn } from "./scripted.ts";
export { ModelError, isModelError, type ModelErrorCode, type ModelErrorFields } from "./errors.ts";
export {
  assertModelApiKeysSet,
  createChatModel,
  modelsMissingApiKeys,
  describeModel,
  resolveModelName,
  type CreateChatModelOptions,
  type ModelDescription,
} from "./factory.ts";
export {
  ChatOpenAICompatible,
  DEFAULT_OPENAI_BASE_URL,
  toOpenAIMessages,
  type ChatOpenAICompatibleCallOptions,
  type ChatOpenAICompatibleFields,
  type FetchLike,
  type OpenAIChatMessage,
} from "./openai-compatible/index.ts";
export { toOpenAITool, toOpenAIToolChoice, type OpenAIFunctionTool } from "./tools.ts";
