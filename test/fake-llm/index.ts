export { startFakeLlmServer } from './server';
export {
  CACHE_TTL_1H_MS,
  CACHE_TTL_5M_MS,
  FAKE_CHARS_PER_TOKEN,
  FakePromptCache,
  type PromptCacheOptions,
  type PromptCacheUsage,
} from './prompt-cache';
export type {
  FakeLlmServer,
  FakeLlmServerOptions,
  FakeProtocol,
  FakeResponder,
  RecordedRequest,
  ScriptedError,
  ScriptedErrorStatus,
  ScriptedHang,
  ScriptedMessage,
  ScriptedResponse,
  ScriptedTextBlock,
  ScriptedToolUseBlock,
  ScriptedUsage,
} from './types';
