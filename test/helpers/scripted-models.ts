/**
 * Scripted models on loopback, speaking the OpenAI Chat Completions and Anthropic Messages wire
 * formats, that forget everything but the system prompt and the last message: what they do is
 * decided from those two alone (`FollowUpModel`). Both check every tool call they make with ajv
 * against the schema they were given, as the vendors' constrained decoding would; the OpenAI one
 * also behaves like strict mode: every property present, null — or the default the description
 * advertises — for those it does not mean.
 */

import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { FormatsPlugin } from 'ajv-formats';

const addFormats = createRequire(import.meta.url)('ajv-formats') as FormatsPlugin;

/** What a forgetful model sees: the system prompt and its last message, plus its tool names. */
export interface Seen {
  system: string;
  last: { kind: 'user'; text: string } | { kind: 'results'; results: { name: string; body: unknown }[] };
  tools: ReadonlySet<string>;
}

export interface Decision {
  text?: string;
  calls?: { name: string; args: Record<string, unknown> }[];
}

export type FollowUpModel = (seen: Seen) => Decision;

export interface ScriptedModel {
  url: string;
  /** Each request as received, for assertions on what the model was shown. */
  requests: { system: string; messages: number; tools: string[]; body: Record<string, unknown> }[];
  /** Each tool call the model made, with the arguments as sent. */
  calls: { name: string; args: Record<string, unknown> }[];
  close(): Promise<void>;
}

type Schema = Record<string, unknown>;

export function parse(text: unknown): unknown {
  if (typeof text !== 'string') {
    return text;
  }
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Every property present: the given value, else the advertised default, else null (strict mode). */
function strictArgs(parameters: Schema, args: Record<string, unknown>): Record<string, unknown> {
  const properties = (parameters.properties ?? {}) as Record<string, { description?: string }>;
  return Object.fromEntries(
    Object.entries(properties).map(([name, property]) => {
      if (name in args) {
        return [name, args[name]];
      }
      const advertised = /Default: ([^ ]+)\.(?: |$)/.exec(property.description ?? '')?.[1];
      return [name, advertised === undefined ? null : JSON.parse(advertised)];
    }),
  );
}

async function listen(handle: (body: Record<string, unknown>, path: string) => unknown): Promise<Server> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) {
      chunks.push(chunk as Buffer);
    }
    try {
      const reply = handle(
        JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
        req.url ?? '',
      );
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
    } catch (error) {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(error) }));
    }
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return server;
}

function closer(server: Server) {
  return () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}

/** Checks each call against the schema its tool was given, as constrained decoding would. */
export function validatorFor(tools: { name: string; schema: Schema }[]) {
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true });
  addFormats(ajv);
  const byName = new Map(tools.map((tool) => [tool.name, ajv.compile(tool.schema)]));
  return (name: string, args: unknown) => {
    const validate = byName.get(name);
    if (!validate) {
      throw new Error(`the model called ${name}, which it was not given`);
    }
    if (!validate(args)) {
      throw new Error(`the model's call of ${name} breaks its schema: ${JSON.stringify(validate.errors)}`);
    }
  };
}

/** Chat Completions, strict function calling. */
export async function startScriptedOpenAi(model: FollowUpModel): Promise<ScriptedModel> {
  const requests: ScriptedModel['requests'] = [];
  const made: ScriptedModel['calls'] = [];
  const server = await listen((body) => {
    const messages = body.messages as {
      role: string;
      content: string | null;
      tool_calls?: unknown[];
      tool_call_id?: string;
    }[];
    const tools = body.tools as { function: { name: string; parameters: Schema } }[];
    const system = messages[0]?.content ?? '';
    requests.push({ system, messages: messages.length, tools: tools.map((t) => t.function.name), body });
    const last = messages.at(-1);
    const callNames = new Map(
      messages.flatMap((m) =>
        ((m.tool_calls ?? []) as { id: string; function: { name: string } }[]).map((c) => [c.id, c.function.name]),
      ),
    );
    // The results of the model's last calls: every tool message after its last own message.
    const results: typeof messages = [];
    for (let i = messages.length - 1; i >= 0 && messages[i]?.role === 'tool'; i--) {
      results.unshift(messages[i] as (typeof messages)[number]);
    }
    const decision = model({
      system,
      last:
        results.length > 0
          ? {
              kind: 'results',
              results: results.map((result) => ({
                name: callNames.get(result.tool_call_id ?? '') ?? '',
                body: parse(result.content),
              })),
            }
          : { kind: 'user', text: last?.content ?? '' },
      tools: new Set(tools.map((t) => t.function.name)),
    });
    const check = validatorFor(tools.map((t) => ({ name: t.function.name, schema: t.function.parameters })));
    const calls = (decision.calls ?? []).map((call) => {
      const parameters = tools.find((t) => t.function.name === call.name)?.function.parameters ?? {};
      const args = strictArgs(parameters, call.args);
      check(call.name, args);
      made.push({ name: call.name, args });
      return {
        id: `call_${randomUUID()}`,
        type: 'function',
        function: { name: call.name, arguments: JSON.stringify(args) },
      };
    });
    const message =
      calls.length > 0
        ? { role: 'assistant', content: null, tool_calls: calls }
        : { role: 'assistant', content: decision.text };
    return { choices: [{ message }] };
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    calls: made,
    close: closer(server),
  };
}

/** Anthropic Messages. */
/**
 * Anthropic Messages (`/v1/messages`, and `/v1/messages?beta=true` of the SDK's beta client).
 * `compactAt`: the requests (counted from 1) answered with a compaction block and stop_reason
 * `compaction`, as the API pauses after compacting with `pause_after_compaction`.
 */
export async function startScriptedAnthropic(
  model: FollowUpModel,
  options: { compactAt?: readonly number[] } = {},
): Promise<ScriptedModel> {
  const requests: ScriptedModel['requests'] = [];
  const made: ScriptedModel['calls'] = [];
  type Block = { type: string; text?: string; id?: string; name?: string; tool_use_id?: string; content?: unknown };
  const server = await listen((body, path) => {
    if (new URL(path, 'http://scripted').pathname !== '/v1/messages') {
      throw new Error(`unexpected path ${path}`);
    }
    const messages = body.messages as { role: string; content: string | Block[] }[];
    const tools = body.tools as { name: string; input_schema: Schema }[];
    const system = String(body.system ?? '');
    requests.push({ system, messages: messages.length, tools: tools.map((t) => t.name), body });
    if (options.compactAt?.includes(requests.length)) {
      return {
        role: 'assistant',
        content: [{ type: 'compaction', content: 'The user asked for a follow-up SMS.', encrypted_content: null }],
        stop_reason: 'compaction',
      };
    }
    const last = messages.at(-1);
    const useNames = new Map(
      messages.flatMap((m) =>
        Array.isArray(m.content) ? m.content.filter((b) => b.type === 'tool_use').map((b) => [b.id, b.name]) : [],
      ),
    );
    const decision = model({
      system,
      last:
        last && Array.isArray(last.content)
          ? {
              kind: 'results',
              results: last.content
                .filter((block) => block.type === 'tool_result')
                .map((block) => ({ name: useNames.get(block.tool_use_id) ?? '', body: parse(block.content) })),
            }
          : { kind: 'user', text: String(last?.content ?? '') },
      tools: new Set(tools.map((t) => t.name)),
    });
    const check = validatorFor(tools.map((t) => ({ name: t.name, schema: t.input_schema })));
    const content = (decision.calls ?? []).map((call) => {
      check(call.name, call.args);
      made.push(call);
      return { type: 'tool_use', id: `toolu_${randomUUID()}`, name: call.name, input: call.args };
    });
    return {
      role: 'assistant',
      content: content.length > 0 ? content : [{ type: 'text', text: decision.text ?? '' }],
      stop_reason: content.length > 0 ? 'tool_use' : 'end_turn',
    };
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    calls: made,
    close: closer(server),
  };
}

const ACTIVE = /^- #\d+ ACTIVE send_sms, .*, id ([0-9a-f-]{36}): (.*)$/m;

/**
 * The model of a follow-up SMS to every contact tagged Lead, deciding from the system prompt and
 * its last message only. Where it has read_working_memory (MCP), it calls it whenever it needs
 * to know where it is — alongside the work, so that the results and the memory arrive together.
 */
export const followUp: FollowUpModel = ({ system, last, tools }) => {
  const canRead = tools.has('read_working_memory');
  const withMemory = (calls: NonNullable<Decision['calls']>): Decision => ({
    calls: canRead ? [...calls, { name: 'read_working_memory', args: {} }] : calls,
  });
  if (last.kind === 'user') {
    return withMemory([{ name: 'search_contacts', args: { tag: 'Lead' } }]);
  }
  const memory = [
    system,
    ...last.results.filter((r) => r.name === 'read_working_memory').map((r) => String(r.body)),
  ].join('\n');
  const active = ACTIVE.exec(memory);
  const body = (test: (b: Record<string, unknown>) => boolean) =>
    last.results.map((r) => r.body as Record<string, unknown>).find((b) => b && typeof b === 'object' && test(b));

  const completed = body((b) => b.status === 'completed');
  if (completed) {
    return { text: `Done: ${completed.completed_count} sent, ${completed.failed_count} failed.` };
  }
  const contacts = body((b) => Array.isArray(b.contact_ids));
  if (contacts && !active) {
    const ids = contacts.contact_ids as string[];
    return {
      calls: [
        {
          name: 'manage_assistant_operation',
          args: {
            action: 'create',
            operation_type: 'send_sms',
            total_items: ids.length,
            item_ids: ids,
            batch_size: 10,
          },
        },
      ],
    };
  }
  const sent = body((b) => Array.isArray(b.sent));
  if (sent && active?.[1]) {
    return {
      calls: [
        {
          name: 'manage_assistant_operation',
          args: { action: 'update', operation_id: active[1], completed_ids: sent.sent, failed: sent.failed },
        },
      ],
    };
  }
  const progress = body((b) => Array.isArray(b.batch) && (b.batch as unknown[]).length > 0);
  if (progress) {
    return withMemory([{ name: 'send_sms', args: { contact_ids: progress.batch } }]);
  }
  const created = body((b) => b.status === 'active' && 'paused_operation_id' in b && 'batch_size' in b);
  if (created) {
    return {
      calls: [{ name: 'manage_assistant_operation', args: { action: 'progress', operation_id: created.operation_id } }],
    };
  }
  if (active?.[1] && active[2]?.startsWith('every item is recorded: complete')) {
    return { calls: [{ name: 'manage_assistant_operation', args: { action: 'complete', operation_id: active[1] } }] };
  }
  if (active?.[1]) {
    return { calls: [{ name: 'manage_assistant_operation', args: { action: 'progress', operation_id: active[1] } }] };
  }
  if (canRead && !last.results.some((r) => r.name === 'read_working_memory')) {
    return { calls: [{ name: 'read_working_memory', args: {} }] };
  }
  return { text: 'I am not sure what to do.' };
};
