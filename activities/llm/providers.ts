import { createAnthropicProvider } from './anthropic';
import { createDemoProvider } from './demo';
import { createOpenAiProvider } from './openai';
import type { LlmProvider, ProviderConfig } from './types';

/** The adapter for a configured provider. */
export function createProvider(config: ProviderConfig): LlmProvider {
  switch (config.kind) {
    case 'anthropic':
      return createAnthropicProvider(config);
    case 'openai':
    case 'openai-compatible':
      return createOpenAiProvider(config);
    case 'demo':
      return createDemoProvider();
  }
}
