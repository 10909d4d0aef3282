/**
 * A parser of `text/event-stream` bodies (the WHATWG server-sent events format): the one opspad
 * uses wherever it reads its own event streams — `opspad/client`, `opspad ops watch` and the
 * tests. Lines end in LF, CRLF or CR; `:` starts a comment; a field without a colon has an empty
 * value; one leading space after the colon is dropped; `data` lines join with LF; an event is
 * dispatched at a blank line, and only when it has data. No dependency beyond web streams.
 * Leaving the iteration early cancels the body (the connection closes).
 */

export interface ServerSentEvent {
  /** `event:` of the frame; "message" when it names none. */
  event: string;
  data: string;
  /** `id:` of the frame, if it had one (the stream's last event id otherwise stays as it was). */
  id?: string;
  /** `retry:`, the reconnection delay the server asks for, in milliseconds. */
  retry?: number;
}

/** Parses one frame's lines; undefined when it carries no data (a comment, a keep-alive). */
function parseFrame(lines: readonly string[]): ServerSentEvent | undefined {
  let event = '';
  const data: string[] = [];
  let id: string | undefined;
  let retry: number | undefined;
  let hasData = false;
  for (const line of lines) {
    if (line === '' || line.startsWith(':')) {
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) {
      value = value.slice(1);
    }
    if (field === 'event') {
      event = value;
    } else if (field === 'data') {
      data.push(value);
      hasData = true;
    } else if (field === 'id' && !value.includes('\0')) {
      id = value;
    } else if (field === 'retry' && /^\d+$/.test(value)) {
      retry = Number(value);
    }
  }
  if (!hasData) {
    return undefined;
  }
  return {
    event: event || 'message',
    data: data.join('\n'),
    ...(id === undefined ? {} : { id }),
    ...(retry === undefined ? {} : { retry }),
  };
}

/** A comment line (`: heartbeat`), text after the colon and its one leading space. */
export interface ServerSentComment {
  comment: string;
}

/** Yields the events of `body` as they arrive; ends when the body does (a partial frame is dropped). */
export async function* parseServerSentEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
): AsyncGenerator<ServerSentEvent> {
  for await (const item of parseEventStream(body, { comments: false })) {
    if (!('comment' in item)) {
      yield item;
    }
  }
}

/**
 * The events of `body` and, with `comments`, its comment lines as they come: what a reader that
 * watches the stream's heartbeats needs (the tests of the stream's timing).
 */
export async function* parseEventStream(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
  { comments }: { comments: boolean },
): AsyncGenerator<ServerSentEvent | ServerSentComment> {
  const decoder = new TextDecoder();
  let buffer = '';
  let lines: string[] = [];
  /** Takes the complete lines off the buffer; at the end, a last lone CR ends a line too. */
  function* frames(final: boolean): Generator<ServerSentEvent | ServerSentComment> {
    for (let match = /\r\n|\r|\n/.exec(buffer); match; match = /\r\n|\r|\n/.exec(buffer)) {
      // A CR at the very end may be the first half of a CRLF still on its way.
      if (!final && match[0] === '\r' && match.index === buffer.length - 1) {
        return;
      }
      const line = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      if (line === '') {
        const frame = parseFrame(lines);
        lines = [];
        if (frame) {
          yield frame;
        }
      } else if (line.startsWith(':')) {
        if (comments) {
          yield { comment: line.slice(line.startsWith(': ') ? 2 : 1) };
        }
      } else {
        lines.push(line);
      }
    }
  }
  for await (const chunk of chunksOf(body)) {
    buffer += decoder.decode(chunk, { stream: true });
    yield* frames(false);
  }
  buffer += decoder.decode();
  yield* frames(true);
}

/**
 * The chunks of a body. A web ReadableStream is read with a reader, which every runtime has
 * (async iteration of streams is missing from some browsers); leaving early cancels the stream,
 * which closes the connection.
 */
async function* chunksOf(body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  if (!('getReader' in body)) {
    yield* body;
    return;
  }
  const reader = body.getReader();
  let done = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        done = true;
        return;
      }
      yield next.value;
    }
  } finally {
    if (!done) {
      await reader.cancel().catch(() => {});
    }
    reader.releaseLock();
  }
}
