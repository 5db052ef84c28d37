export {
  ChatOpenAICompatible,
  DEFAULT_OPENAI_BASE_URL,
  type ChatOpenAICompatibleCallOptions,
  type ChatOpenAICompatibleFields,
  type FetchLike,
} from "./chat-model.ts";
export { toOpenAIMessages } from "./mapping.ts";
export type { OpenAIChatMessage } from "./wire.ts";
