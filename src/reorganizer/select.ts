/** Picks the reorganizer the configuration names (OPSPAD_LLM_* in docs/configuration.md). */
import type { Settings } from '../config/env.ts';
import { anthropicReorganizer, builtinReorganizer, openAiReorganizer, type Reorganizer } from './providers.ts';

const DEFAULT_MODELS = { openai: 'gpt-4o-mini', anthropic: 'claude-sonnet-4-5' } as const;

export function selectReorganizer(config: Settings<'reorganizer'>): Reorganizer {
  const provider = config.OPSPAD_LLM_PROVIDER ?? (config.OPSPAD_LLM_BASE_URL ? 'openai' : 'builtin');
  if (provider === 'builtin') {
    return builtinReorganizer;
  }
  const options = {
    baseUrl:
      config.OPSPAD_LLM_BASE_URL ?? (provider === 'openai' ? 'https://api.openai.com/v1' : 'https://api.anthropic.com'),
    apiKey: config.OPSPAD_LLM_API_KEY,
    model: config.OPSPAD_LLM_MODEL ?? DEFAULT_MODELS[provider],
    timeoutMs: config.OPSPAD_LLM_TIMEOUT,
  };
  return provider === 'openai' ? openAiReorganizer(options) : anthropicReorganizer(options);
}
