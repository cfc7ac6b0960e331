import type { ChatMessage, ToolDefinition } from '../../activities/llm/types';
import {
  calibrate,
  calibrationRatio,
  countMessageTokens,
  countTokens,
  countTokensRaw,
  countToolTokens,
  encodingForModel,
  freeEncoders,
  heuristicTokenCount,
  resetCalibration,
  setTiktokenDisabledForTesting,
} from '../../activities/context/tokens';

afterEach(() => {
  resetCalibration();
  setTiktokenDisabledForTesting(false);
});

describe('encodingForModel', () => {
  test.each([
    ['gpt-4o', 'o200k_base'],
    ['gpt-4o-mini', 'o200k_base'],
    ['gpt-4.1-nano', 'o200k_base'],
    ['gpt-5', 'o200k_base'],
    ['gpt-5-mini-2025-08-07', 'o200k_base'],
    ['o1', 'o200k_base'],
    ['o3-mini', 'o200k_base'],
    ['o4-mini', 'o200k_base'],
    ['openai/gpt-4o', 'o200k_base'],
    ['gpt-4-turbo', 'cl100k_base'],
    ['gpt-3.5-turbo', 'cl100k_base'],
    ['claude-sonnet-4-5', 'cl100k_base'],
    ['llama3.1:8b', 'cl100k_base'],
    [undefined, 'cl100k_base'],
  ])('%s → %s', (model, encoding) => {
    expect(encodingForModel(model)).toBe(encoding);
  });
});

describe('countTokens', () => {
  test('counts with the model encoding (known tiktoken values)', () => {
    expect(countTokensRaw('hello world', 'gpt-4o')).toBe(2);
    expect(countTokensRaw('hello world', 'claude-sonnet-4-5')).toBe(2);
    expect(countTokensRaw('', 'gpt-4o')).toBe(0);
  });

  test('text containing special-token strings does not throw and is counted as plain text', () => {
    const text = 'before <|endoftext|> middle <|im_start|>system <|fim_prefix|> after';
    for (const model of ['gpt-4o', 'claude-sonnet-4-5', 'gpt-4-turbo']) {
      expect(() => countTokensRaw(text, model)).not.toThrow();
      // Plain-text encoding splits `<|endoftext|>` into several ordinary tokens, never one special token.
      expect(countTokensRaw('<|endoftext|>', model)).toBeGreaterThan(1);
    }
  });

  test('lone surrogates do not throw', () => {
    expect(countTokensRaw('a\uD800b\uDC00c', 'gpt-4o')).toBeGreaterThan(0);
  });

  test('a megabyte with no word breaks is counted in bounded time (slices, not one quadratic piece)', () => {
    const start = Date.now();
    const tokens = countTokensRaw('a'.repeat(1_000_000), 'gpt-4o');
    expect(Date.now() - start).toBeLessThan(10_000);
    // Whole-run BPE gives 125,000 tokens for this input; slicing may add at most one token per slice.
    expect(tokens).toBeGreaterThanOrEqual(125_000);
    expect(tokens).toBeLessThan(125_000 + 1_000_000 / 256 + 1);
  });

  test('falls back to chars / 3.5 when tiktoken is unavailable', () => {
    setTiktokenDisabledForTesting(true);
    expect(countTokensRaw('x'.repeat(35))).toBe(10);
    expect(countTokensRaw('x'.repeat(36))).toBe(11);
    expect(heuristicTokenCount('abcdefg')).toBe(2);
  });

  test('freed encoders are re-created on next use', () => {
    expect(countTokensRaw('hello world', 'gpt-4o')).toBe(2);
    freeEncoders();
    expect(countTokensRaw('hello world', 'gpt-4o')).toBe(2);
  });
});

describe('messages and tools', () => {
  const messages: ChatMessage[] = [
    { role: 'user', content: [{ type: 'text', text: 'hello world' }] },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'reading' },
        { type: 'tool_use', id: 'call_1', name: 'file_read', input: { path: '/tmp/a.txt' } },
      ],
    },
    { role: 'user', content: [{ type: 'tool_result', toolUseId: 'call_1', content: 'file contents <|endoftext|>' }] },
  ];

  test('countMessageTokens adds block and message overheads to the text', () => {
    const text =
      countTokensRaw('hello world') +
      countTokensRaw('reading') +
      countTokensRaw('file_read') +
      countTokensRaw('{"path":"/tmp/a.txt"}') +
      countTokensRaw('file contents <|endoftext|>');
    // 3 messages × 4 overhead + 2 tool blocks × 10 overhead.
    expect(countMessageTokens(messages)).toBe(text + 3 * 4 + 2 * 10);
  });

  test('countToolTokens counts name, description and JSON schema', () => {
    const tools: ToolDefinition[] = [
      {
        name: 'file_read',
        description: 'Read a file',
        inputSchema: { type: 'object', properties: { path: { type: 'string' } } },
      },
    ];
    const expected =
      8 +
      countTokensRaw('file_read') +
      countTokensRaw('Read a file') +
      countTokensRaw(JSON.stringify(tools[0]!.inputSchema));
    expect(countToolTokens(tools)).toBe(expected);
    expect(countToolTokens([])).toBe(0);
  });
});

describe('calibrate', () => {
  test('moves the per-model ratio towards reported / estimated and later estimates use it', () => {
    const raw = countTokensRaw('hello world '.repeat(500), 'claude-sonnet-4-5');
    expect(calibrationRatio('claude-sonnet-4-5')).toBe(1);
    const ratio = calibrate('claude-sonnet-4-5', 10_000, 12_000);
    expect(ratio).toBeCloseTo(1 + 0.3 * 0.2, 10);
    expect(countTokens('hello world '.repeat(500), 'claude-sonnet-4-5')).toBe(Math.ceil(raw * ratio));
    // Other models are unaffected.
    expect(calibrationRatio('gpt-4o')).toBe(1);
  });

  test('converges on a consistent ratio', () => {
    for (let i = 0; i < 50; i++) calibrate('m', 10_000 * calibrationRatio('m'), 11_500);
    expect(calibrationRatio('m')).toBeCloseTo(1.15, 2);
  });

  test('stays within [0.5, 2] and ignores tiny or invalid samples', () => {
    for (let i = 0; i < 80; i++) {
      calibrate('wild', 1_000, 100_000);
      expect(calibrationRatio('wild')).toBeLessThanOrEqual(2);
    }
    expect(calibrationRatio('wild')).toBeCloseTo(2, 6);
    for (let i = 0; i < 80; i++) {
      calibrate('wild', 100_000, 1);
      expect(calibrationRatio('wild')).toBeGreaterThanOrEqual(0.5);
    }
    expect(calibrationRatio('wild')).toBeCloseTo(0.5, 6);
    resetCalibration();
    calibrate('small', 100, 10_000); // under 256 estimated tokens
    calibrate('small', 10_000, 0);
    calibrate('small', Number.NaN, 10_000);
    expect(calibrationRatio('small')).toBe(1);
  });
});
