/** The event-stream parser: the WHATWG framing rules, whatever the chunk boundaries. */
import { describe, expect, it } from 'vitest';
import { parseEventStream, parseServerSentEvents, type ServerSentEvent } from './sse.ts';

function bodyOf(chunks: readonly string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) {
        controller.enqueue(encoder.encode(chunk));
      }
      controller.close();
    },
  });
}

async function parse(chunks: readonly string[]): Promise<ServerSentEvent[]> {
  const events: ServerSentEvent[] = [];
  for await (const event of parseServerSentEvents(bodyOf(chunks))) {
    events.push(event);
  }
  return events;
}

/** Every way of cutting `text` in two. */
function splits(text: string): string[][] {
  return Array.from({ length: text.length + 1 }, (_, i) => [text.slice(0, i), text.slice(i)]);
}

describe('parseServerSentEvents', () => {
  it('reads event, data, id and retry; joins data lines; defaults the event to message', async () => {
    const events = await parse([
      'event: progress\ndata: {"a":1}\n\n',
      'id: 7\nevent: batch_recorded\ndata: line one\ndata: line two\n\n',
      'data: plain\nretry: 2500\n\n',
    ]);
    expect(events).toEqual([
      { event: 'progress', data: '{"a":1}' },
      { event: 'batch_recorded', data: 'line one\nline two', id: '7' },
      { event: 'message', data: 'plain', retry: 2500 },
    ]);
  });

  it('skips comments and frames without data, and keeps a value that has no space after the colon', async () => {
    const events = await parse([': keep-alive\n\n', 'event: nothing\n\n', 'data:tight\n\n', 'data\n\n']);
    expect(events).toEqual([
      { event: 'message', data: 'tight' },
      { event: 'message', data: '' },
    ]);
  });

  it('accepts CRLF and CR line endings, and a multi-byte character split across chunks', async () => {
    const crlf = await parse(['event: a\r\ndata: é\r\n\r\n', 'event: b\rdata: 2\r\r']);
    expect(crlf).toEqual([
      { event: 'a', data: 'é' },
      { event: 'b', data: '2' },
    ]);
    const bytes = new TextEncoder().encode('data: é€\n\n');
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const byte of bytes) {
          controller.enqueue(Uint8Array.of(byte));
        }
        controller.close();
      },
    });
    const events: ServerSentEvent[] = [];
    for await (const event of parseServerSentEvents(body)) {
      events.push(event);
    }
    expect(events).toEqual([{ event: 'message', data: 'é€' }]);
  });

  it('gives the same events wherever the chunks are cut, a CRLF cut in two included', async () => {
    const text = 'id: 1\r\nevent: x\r\ndata: {"n":1}\r\n\r\n: c\r\ndata: y\r\n\r\n';
    const whole = await parse([text]);
    expect(whole).toEqual([
      { event: 'x', data: '{"n":1}', id: '1' },
      { event: 'message', data: 'y' },
    ]);
    for (const chunks of splits(text)) {
      expect(await parse(chunks)).toEqual(whole);
    }
  });

  it('drops a frame the stream ends in the middle of', async () => {
    expect(await parse(['data: complete\n\n', 'data: cut off\n'])).toEqual([{ event: 'message', data: 'complete' }]);
  });

  it('cancels the body when the consumer stops early (the connection closes), and releases it', async () => {
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('data: one\n\ndata: two\n\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const event of parseServerSentEvents(body)) {
      expect(event.data).toBe('one');
      break;
    }
    expect(cancelled).toBe(true);
    expect(body.locked).toBe(false);
  });

  it('hands out comments (heartbeats) in stream order when asked, and only then', async () => {
    const chunks = ['event: progress\ndata: 1\n\n', ': heartbeat\n\n', ':no space\n\n', 'event: end\ndata: 2\n\n'];
    const items: unknown[] = [];
    for await (const item of parseEventStream(bodyOf(chunks), { comments: true })) {
      items.push(item);
    }
    expect(items).toEqual([
      { event: 'progress', data: '1' },
      { comment: 'heartbeat' },
      { comment: 'no space' },
      { event: 'end', data: '2' },
    ]);
    expect(await parse(chunks)).toEqual([
      { event: 'progress', data: '1' },
      { event: 'end', data: '2' },
    ]);
  });
});
