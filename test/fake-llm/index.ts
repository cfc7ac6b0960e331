export { startFakeLlmServer } from './server';
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
