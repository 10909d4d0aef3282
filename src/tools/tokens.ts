/**
 * Token counting for the context fragment's budget: o200k (GPT-4o and later; a close enough
 * measure for other models' tokenizers) through gpt-tokenizer. Loaded on first use, so processes
 * that never render a fragment (workers) never pay its ~20 MB of ranks.
 */
import type { CountTokens } from '../domain/context-compose.ts';

let loading: Promise<CountTokens> | undefined;

/** The o200k token counter, loaded once. */
export function countTokens(): Promise<CountTokens> {
  loading ??= import('gpt-tokenizer/encoding/o200k_base').then(
    (encoding): CountTokens =>
      (text) =>
        encoding.countTokens(text),
  );
  return loading;
}
