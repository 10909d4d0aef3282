/**
 * A real local HTTP server speaking the OpenAI chat-completions and Anthropic messages wire
 * formats, answering reorganization prompts from a script: echo the pad it was given (optionally
 * changed), cite a ref that does not exist, fail with HTTP 500, or hold the answer until released.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Pad = {
  goals: unknown[];
  open_items: unknown[];
  facts: { text: string; source_ref: string }[];
  refs: { id: string; kind: string }[];
};

export type Behaviour =
  | { kind: 'echo'; change?: (pad: Pad) => Pad }
  | { kind: 'unknown_ref' }
  | { kind: 'status'; status: number }
  | { kind: 'hold'; release: Promise<void>; change?: (pad: Pad) => Pad };

export interface FakeLlm {
  url: string;
  /** Behaviours for the next calls, in order; when empty, calls echo the pad. */
  script: Behaviour[];
  requests: { path: string; body: Record<string, unknown> }[];
  /** Resolves when the next request arrives. */
  nextRequest(): Promise<void>;
  close(): Promise<void>;
}

function padFromPrompt(prompt: string): Pad {
  const match = /Current scratchpad:\n(.*)\n/.exec(prompt);
  if (!match?.[1]) {
    throw new Error('no scratchpad in the prompt');
  }
  return JSON.parse(match[1]) as Pad;
}

export async function startFakeLlm(): Promise<FakeLlm> {
  const waiters: (() => void)[] = [];
  const fake: Omit<FakeLlm, 'url' | 'close'> = {
    script: [],
    requests: [],
    nextRequest: () => new Promise<void>((resolve) => waiters.push(resolve)),
  };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) {
      chunks.push(chunk as Buffer);
    }
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    fake.requests.push({ path: req.url ?? '', body });
    for (const wake of waiters.splice(0)) {
      wake();
    }
    const messages = body.messages as { role: string; content: string }[];
    const prompt = messages.at(-1)?.content ?? '';
    const behaviour = fake.script.shift() ?? { kind: 'echo' };
    if (behaviour.kind === 'status') {
      res.writeHead(behaviour.status, { 'content-type': 'application/json' }).end('{"error":"scripted failure"}');
      return;
    }
    if (behaviour.kind === 'hold') {
      await behaviour.release;
    }
    let pad = padFromPrompt(prompt);
    if (behaviour.kind === 'unknown_ref') {
      pad = {
        ...pad,
        facts: [...pad.facts, { text: 'invented', source_ref: 'web:made-up' }],
        refs: [...pad.refs, { id: 'web:made-up', kind: 'url' }],
      };
    } else if (behaviour.change) {
      pad = behaviour.change(pad);
    }
    const answer = { schema: 'opspad.scratchpad.v1', ...pad };
    const reply = req.url?.endsWith('/messages')
      ? { content: [{ type: 'tool_use', name: 'save_scratchpad', input: answer }] }
      : { choices: [{ message: { role: 'assistant', content: JSON.stringify(answer) } }] };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    ...fake,
    get script() {
      return fake.script;
    },
    set script(value) {
      fake.script = value;
    },
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
