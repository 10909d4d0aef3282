/**
 * Reads a server-sent event stream frame by frame, comments (heartbeats) included, for tests
 * that check how a stream behaves over time and how it ends. The parsing is opspad/client's
 * (src/client/sse.ts), so the tests read streams as clients do.
 */
import { parseEventStream } from '../../src/client/sse.ts';

export interface Frame {
  /** `comment` for a `: …` line; otherwise the event's name (`message` when unnamed). */
  event: string;
  data: string;
  id?: string;
}

export interface EventStream {
  status: number;
  headers: Headers;
  /** The body when the answer is not a stream (an error). */
  text?: string;
  /** The next frame, or undefined once the server has ended the stream. */
  next(): Promise<Frame | undefined>;
  /** Reads frames until `match` holds (returns it) or the stream ends (throws, listing what came). */
  until(match: (frame: Frame) => boolean, what?: string): Promise<Frame>;
  /** Hangs up. */
  close(): Promise<void>;
}

export async function openEventStream(
  url: string,
  apiKey: string,
  { timeoutMs = 30_000, authorization }: { timeoutMs?: number; authorization?: string } = {},
): Promise<EventStream> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error(`no end of ${url} within ${timeoutMs} ms`)), timeoutMs);
  const response = await fetch(url, {
    // An operator page's stream signs in as the operator; the API's, with the key.
    headers: { authorization: authorization ?? `Bearer ${apiKey}` },
    signal: abort.signal,
  });
  if (!response.ok || !response.body) {
    clearTimeout(timer);
    return {
      status: response.status,
      headers: response.headers,
      text: await response.text(),
      next: async () => undefined,
      until: async () => {
        throw new Error(`the stream answered ${response.status}`);
      },
      close: async () => {},
    };
  }
  const body = response.body;
  const items = parseEventStream(body, { comments: true });
  const next = async (): Promise<Frame | undefined> => {
    const item = await items.next();
    if (item.done) {
      clearTimeout(timer);
      return undefined;
    }
    if ('comment' in item.value) {
      return { event: 'comment', data: item.value.comment.trim() };
    }
    const { event, data, id } = item.value;
    return id === undefined ? { event, data } : { event, data, id };
  };
  return {
    status: response.status,
    headers: response.headers,
    next,
    async until(match, what = 'the expected frame') {
      const seen: string[] = [];
      for (let frame = await next(); frame; frame = await next()) {
        if (match(frame)) {
          return frame;
        }
        seen.push(frame.event);
      }
      throw new Error(`the stream ended before ${what}; it sent: ${seen.join(', ')}`);
    },
    async close() {
      clearTimeout(timer);
      // Leaving the parser early cancels the body, which closes the connection; a body never
      // read is cancelled directly (once the parser holds it, that call is refused, harmlessly).
      await items.return(undefined).catch(() => {});
      await body.cancel().catch(() => {});
    },
  };
}
