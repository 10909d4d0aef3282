/**
 * Token counting for the context fragment's budget: o200k (GPT-4o and later; a close enough
 * measure for other models' tokenizers) through gpt-tokenizer. Loaded on first use, so processes
 * that never render a fragment (workers) never pay its ~20 MB of ranks.
 *
 * The fragment is counted line by line and is byte-stable between turns, so most lines of a
 * render were counted on the turn before: the counts of recent lines are kept (a bounded cache,
 * oldest out first; long lines are not kept), which takes tokenizing off most turns.
 */
import type { CountTokens } from '../domain/context-compose.ts';

const CACHED_LINES = 5000;
const CACHED_LINE_MAX_CHARS = 1000;

let loading: Promise<CountTokens> | undefined;

function cached(count: CountTokens): CountTokens {
  const recent = new Map<string, number>();
  return (text) => {
    const known = recent.get(text);
    if (known !== undefined) {
      return known;
    }
    const tokens = count(text);
    if (text.length <= CACHED_LINE_MAX_CHARS) {
      if (recent.size >= CACHED_LINES) {
        recent.delete(recent.keys().next().value as string);
      }
      recent.set(text, tokens);
    }
    return tokens;
  };
}

/** The o200k token counter, loaded once. */
export function countTokens(): Promise<CountTokens> {
  loading ??= import('gpt-tokenizer/encoding/o200k_base').then((encoding) =>
    cached((text) => encoding.countTokens(text)),
  );
  return loading;
}
