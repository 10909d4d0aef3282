/**
 * Reads a server-sent event stream frame by frame, comments (heartbeats) included, for tests
 * that check how a stream behaves over time and how it ends.
 */

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
  { timeoutMs = 30_000 }: { timeoutMs?: number } = {},
): Promise<EventStream> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error(`no end of ${url} within ${timeoutMs} ms`)), timeoutMs);
  const response = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` }, signal: abort.signal });
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
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let done = false;
  const next = async (): Promise<Frame | undefined> => {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.startsWith(':')) {
          return { event: 'comment', data: block.slice(1).trim() };
        }
        const frame: Frame = { event: 'message', data: '' };
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) {
            frame.event = line.slice(6).trim();
          } else if (line.startsWith('data:')) {
            frame.data += line.slice(5).trim();
          } else if (line.startsWith('id:')) {
            frame.id = line.slice(3).trim();
          }
        }
        return frame;
      }
      if (done) {
        clearTimeout(timer);
        return undefined;
      }
      const chunk = await reader.read();
      done = chunk.done;
      buffer += decoder.decode(chunk.value, { stream: !chunk.done });
    }
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
      await reader.cancel().catch(() => {});
    },
  };
}
