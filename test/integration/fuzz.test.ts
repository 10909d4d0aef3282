/**
 * Property-based fuzzing (fast-check) of every tool and REST input, over loopback HTTP against a
 * running opspad: random JSON, wrong types, huge strings, unicode (lone surrogates, U+0000),
 * prototype-pollution keys sent as raw JSON text (so they are own keys), deep nesting, and
 * mutations of valid inputs (a field dropped, retyped, added).
 *
 * Every answer must be a 4xx `{error: {code, message, details}}` whose status matches its code,
 * or a 2xx for an input that happens to be valid — never a 5xx. After each call a digest of the
 * fuzzing organization's rows is taken: a rejected call must leave it as it was. A second
 * organization (the victim) has data of its own, and its ids are in the fuzzer's pools: no
 * answer may carry the victim's data, and the victim's rows — all rows but the fuzzer's — must
 * be unchanged after every property. Object.prototype must not be polluted.
 *
 * The bulk runs on real Postgres, in a database of the file's own (so "all rows but the
 * fuzzer's" means exactly that, with other test files running): measured on a 2-core machine,
 * the same 10,478 cases took 43 s there and 55 s on PGlite, whose WASM engine shares the test's
 * thread. A sample of the same properties runs on PGlite. OPSPAD_FUZZ_SEED replays a run;
 * OPSPAD_FUZZ_SCALE multiplies the case counts.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/domain/errors.ts';
import { OPERATION_ACTIONS } from '../../src/domain/operation-input.ts';
import { type Digest, organizationDigest, ownAndOthersDigests, uncoveredTables } from '../helpers/digest.ts';
import { type Engine, type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { privatePostgresDatabase } from '../helpers/private-database.ts';
import { type RawClient, type RawRequest, type RawResponse, rawClient } from '../helpers/raw-http.ts';

const SCALE = Number(process.env.OPSPAD_FUZZ_SCALE ?? 1);
const SEED = process.env.OPSPAD_FUZZ_SEED === undefined ? undefined : Number(process.env.OPSPAD_FUZZ_SEED);
/** The share of each property's cases that also runs on PGlite. */
const PGLITE_SHARE = 0.08;

// ─── JSON as text ────────────────────────────────────────────────────────────────────────────

type PoolName = 'conversation' | 'operation' | 'execution' | 'item';

/** An id taken, when the request is sent, from the fuzzer's pools (its own ids and the victim's). */
class IdRef {
  constructor(
    readonly pool: PoolName,
    readonly index: number,
    readonly prefix = '',
    readonly suffix = '',
  ) {}
  [fc.toStringMethod]() {
    return `IdRef(${this.pool}[${this.index}]${this.prefix || this.suffix ? `, ${this.prefix}…${this.suffix}` : ''})`;
  }
}

/** JSON text written as is: numbers JSON.stringify cannot write (1e400), deep nesting. */
class RawJson {
  constructor(readonly text: string) {}
  [fc.toStringMethod]() {
    return `RawJson(${preview(this.text)})`;
  }
}

/** A JSON object as text: entries in order, repeated keys and "__proto__" included. */
class Obj {
  constructor(readonly entries: readonly (readonly [string, Node])[]) {}
  [fc.toStringMethod]() {
    return `Obj(${preview(serialize(this, PREVIEW_POOLS))})`;
  }
}

type Node = null | boolean | number | string | IdRef | RawJson | Obj | Node[];

type Pools = Record<PoolName, readonly string[]>;
const PREVIEW_POOLS: Pools = { conversation: ['<c>'], operation: ['<op>'], execution: ['<ex>'], item: ['<item>'] };

/** `text` with lone surrogates replaced, so encodeURIComponent takes it. */
function wellFormed(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

function preview(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}… (${text.length} chars)` : text;
}

function resolve(ref: IdRef, pools: Pools): string {
  const pool = pools[ref.pool];
  return `${ref.prefix}${pool[ref.index % pool.length]}${ref.suffix}`;
}

function serialize(node: Node, pools: Pools): string {
  if (node instanceof Obj) {
    return `{${node.entries.map(([key, value]) => `${JSON.stringify(key)}:${serialize(value, pools)}`).join(',')}}`;
  }
  if (node instanceof RawJson) {
    return node.text;
  }
  if (node instanceof IdRef) {
    return JSON.stringify(resolve(node, pools));
  }
  if (Array.isArray(node)) {
    return `[${node.map((n) => serialize(n, pools)).join(',')}]`;
  }
  return JSON.stringify(node);
}

/** A plain value (built by the valid-input arbitraries) as a {@link Node}. */
function toNode(value: unknown): Node {
  if (value instanceof IdRef || value instanceof RawJson || value instanceof Obj || value === null) {
    return value;
  }
  if (Array.isArray(value)) {
    return value.map(toNode);
  }
  if (typeof value === 'object') {
    return new Obj(
      Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, toNode(v)] as const),
    );
  }
  return value as Node;
}

// ─── Arbitraries ─────────────────────────────────────────────────────────────────────────────

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'] as const;
/** Every field name the inputs know, so random objects often hit real fields. */
const KNOWN_KEYS = [
  'action',
  'operation_type',
  'total_items',
  'item_ids',
  'batch_size',
  'query_params',
  'notes',
  'execution',
  'max_parallel_batches',
  'max_failure_rate',
  'operation_id',
  'lease_owner',
  'lease_seconds',
  'completed_ids',
  'failed',
  'id',
  'reason',
  'force',
  'failures_cursor',
  'failures_limit',
  'return_history',
  'include_history',
  'persistent_notes',
  'expected_version',
  'task',
  'add',
  'remove',
  'replace',
  'goals',
  'open_items',
  'facts',
  'refs',
  'text',
  'source_ref',
  'kind',
  'label',
  'excerpt',
  'scratchpad',
  'schema',
  'reorganize_every',
  'schema_retries',
  'max_recent_messages',
  'recent_messages',
  'role',
  'content',
] as const;

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code));
const specialCharacter = fc.constantFrom(
  '\u0000',
  '\u0001',
  '\u001f',
  '\u007f',
  '\u0085',
  '\u00a0',
  '\u2028',
  '\u2029',
  '\u202e',
  '\u200b',
  '\ufeff',
  '\ufffd',
  '\uffff',
  '\u{10ffff}',
  '\u{1f600}',
  'e\u0301',
  '"',
  '\\',
  '/',
  '%',
  '%00',
  '\\u0000',
  '<script>',
  "'; DROP TABLE organization; --",
  '$1',
  '\n',
  '\r\n',
  '\t',
  ' ',
);
/** Characters of every kind: any code point, lone surrogates, NUL and friends. */
const weirdUnit = fc.oneof(
  { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), weight: 4 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 3 },
  { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }), weight: 2 },
  { arbitrary: loneSurrogate, weight: 1 },
  { arbitrary: specialCharacter, weight: 2 },
);
const unicodeString = fc.string({ unit: weirdUnit, minLength: 1, maxLength: 40 });
const weirdString = fc.oneof(
  { arbitrary: unicodeString, weight: 5 },
  {
    arbitrary: fc.constantFrom(
      '',
      ' ',
      ...PROTO_KEYS,
      'toString',
      'hasOwnProperty',
      'valueOf',
      'null',
      'true',
      '0',
      '-1',
      '1e309',
      'NaN',
      'undefined',
      '00000000-0000-0000-0000-000000000000',
      'ffffffff-ffff-ffff-ffff-ffffffffffff',
      ...OPERATION_ACTIONS,
      'create ',
      'CREATE',
      'background',
      'assistant',
      'opspad.scratchpad.v1',
      'user:initial',
    ),
    weight: 3,
  },
  { arbitrary: fc.uuid(), weight: 1 },
  { arbitrary: fc.nat({ max: 3000 }).map((n) => 'x'.repeat(n)), weight: 1 },
);
const edgeNumber = fc.oneof(
  fc.constantFrom(0, -0, -1, 1, 1.5, 0.5, 2 ** 31, 2 ** 31 - 1, -(2 ** 31), 2 ** 53 + 2, 1e21, 1e308, -1e308, 5e-324),
  fc.integer({ min: -100, max: 100_000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const rawNumber = fc
  .constantFrom('1e400', '-1e400', '1E-400', '-0', '0.0000000000000000000001', '123456789012345678901234567890', '1.0')
  .map((text) => new RawJson(text));
const idRef = (pool: PoolName) => fc.nat({ max: 63 }).map((index) => new IdRef(pool, index));
const anyIdRef = fc.oneof(idRef('conversation'), idRef('operation'), idRef('execution'), idRef('item'));

const scalar: fc.Arbitrary<Node> = fc.oneof(
  { arbitrary: fc.constant(null), weight: 1 },
  { arbitrary: fc.boolean(), weight: 1 },
  { arbitrary: edgeNumber, weight: 2 },
  { arbitrary: rawNumber, weight: 1 },
  { arbitrary: weirdString, weight: 4 },
  { arbitrary: anyIdRef, weight: 2 },
);
const anyKey = fc.oneof(
  { arbitrary: fc.constantFrom(...KNOWN_KEYS), weight: 4 },
  { arbitrary: weirdString, weight: 2 },
  { arbitrary: fc.constantFrom(...PROTO_KEYS), weight: 1 },
);

/** Any JSON value (objects as {@link Obj}, with own "__proto__" keys and repeated keys). */
const jsonNode: fc.Arbitrary<Node> = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    { arbitrary: scalar, weight: 3 },
    { arbitrary: fc.array(tie('node'), { maxLength: 5 }), weight: 1 },
    {
      arbitrary: fc
        .array(fc.tuple(anyKey, tie('node')), { maxLength: 6 })
        .map((entries) => new Obj(entries as [string, Node][])),
      weight: 2,
    },
  ),
})).node;

/** Values likely to be valid somewhere, to get past the first check more often. */
const plausible = fc.oneof(
  { arbitrary: fc.constantFrom(...OPERATION_ACTIONS), weight: 2 },
  { arbitrary: anyIdRef, weight: 3 },
  { arbitrary: fc.array(idRef('item'), { minLength: 1, maxLength: 4 }), weight: 1 },
  { arbitrary: fc.integer({ min: 0, max: 10 }), weight: 2 },
  { arbitrary: fc.string({ minLength: 1, maxLength: 12 }), weight: 2 },
  { arbitrary: fc.boolean(), weight: 1 },
  { arbitrary: fc.constant(null), weight: 1 },
);

/** An object of known keys with plausible or random values. */
const structuredObject = fc
  .array(fc.tuple(anyKey, fc.oneof({ arbitrary: plausible, weight: 2 }, { arbitrary: jsonNode, weight: 1 })), {
    minLength: 1,
    maxLength: 7,
  })
  .map((entries) => new Obj(entries as [string, Node][]));

// Valid inputs, per tool and REST body. Ids come from the pools (own or the victim's).

const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 2 });
const nullish = <T>(arb: fc.Arbitrary<T>) => fc.oneof(arb, fc.constant(null), fc.constant(undefined));
const shortText = fc.string({ minLength: 1, maxLength: 24 });
const itemIdList = fc.uniqueArray(fc.string({ minLength: 1, maxLength: 16 }), { minLength: 1, maxLength: 8 });
const refIdArb = fc.oneof(
  fc.constantFrom('user:initial', 'note:1', 'turn:1'),
  fc.nat({ max: 63 }).map((i) => new IdRef('operation', i, 'operation:')),
  fc.nat({ max: 63 }).map((i) => new IdRef('operation', i, 'item:', ':f-1')),
);
const padRef = fc.record(
  { id: refIdArb, kind: fc.constantFrom('note', 'operation', 'item', 'message'), label: opt(shortText) },
  { requiredKeys: ['id', 'kind'] },
);
const padItem = fc.record({ text: shortText, source_ref: opt(refIdArb) }, { requiredKeys: ['text'] });
const padFact = fc.record({ text: shortText, source_ref: refIdArb });
const sections = fc.record(
  {
    goals: fc.array(padItem, { maxLength: 2 }),
    open_items: fc.array(padItem, { maxLength: 2 }),
    facts: fc.array(padFact, { maxLength: 2 }),
    refs: fc.array(padRef, { maxLength: 2 }),
  },
  { requiredKeys: [] },
);

const validOperationInput = fc.oneof(
  fc
    .record(
      {
        operation_type: fc.constantFrom('send_sms', 'fuzz_work', 'demo'),
        item_ids: itemIdList,
        batch_size: opt(fc.integer({ min: 1, max: 10 })),
        query_params: opt(fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })),
        notes: opt(shortText),
        execution: opt(fc.constantFrom('assistant', 'background')),
        max_parallel_batches: opt(fc.integer({ min: 1, max: 64 })),
        max_failure_rate: opt(fc.constantFrom(0.1, 0.5, 1)),
      },
      { requiredKeys: ['operation_type', 'item_ids'] },
    )
    .map((input) => ({ action: 'create', ...input, total_items: input.item_ids.length })),
  fc.record(
    {
      action: fc.constant('progress'),
      operation_id: nullish(idRef('operation')),
      lease_owner: opt(shortText),
      lease_seconds: opt(fc.integer({ min: 1, max: 86_400 })),
    },
    { requiredKeys: ['action'] },
  ),
  fc.record(
    {
      action: fc.constant('update'),
      operation_id: idRef('operation'),
      completed_ids: opt(fc.array(idRef('item'), { maxLength: 3 })),
      failed: opt(fc.array(fc.record({ id: idRef('item'), reason: shortText }), { maxLength: 2 })),
      lease_owner: opt(shortText),
    },
    { requiredKeys: ['action', 'operation_id'] },
  ),
  fc.record(
    { action: fc.constant('complete'), operation_id: idRef('operation'), force: opt(fc.boolean()) },
    { requiredKeys: ['action', 'operation_id'] },
  ),
  fc.record({ action: fc.constantFrom('resume', 'cancel'), operation_id: idRef('operation') }),
  fc.record({ action: fc.constant('pause'), operation_id: nullish(idRef('operation')) }, { requiredKeys: ['action'] }),
  fc.record(
    {
      action: fc.constant('get'),
      operation_id: nullish(idRef('operation')),
      failures_cursor: opt(fc.constantFrom('0', '1', '42')),
      failures_limit: opt(fc.integer({ min: 1, max: 500 })),
    },
    { requiredKeys: ['action'] },
  ),
  fc.record(
    {
      action: fc.constant('retry_failed'),
      operation_id: idRef('operation'),
      batch_size: opt(fc.integer({ min: 1, max: 10 })),
    },
    { requiredKeys: ['action', 'operation_id'] },
  ),
);

const validWrite = fc.record(
  { notes: shortText, return_history: nullish(fc.boolean()), include_history: opt(fc.boolean()) },
  { requiredKeys: ['notes'] },
);
const validRead = fc.record({ persistent_notes: nullish(shortText) }, { requiredKeys: [] });
const validUpdateScratchpad = fc.record(
  {
    expected_version: nullish(fc.nat({ max: 5 })),
    task: opt(shortText),
    add: opt(sections),
    remove: opt(
      fc.record({ goals: fc.array(shortText, { maxLength: 2 }), refs: fc.array(refIdArb) }, { requiredKeys: [] }),
    ),
    replace: opt(sections),
    reason: opt(shortText),
  },
  { requiredKeys: [] },
);
const validPutScratchpad = fc.record(
  {
    expected_version: fc.nat({ max: 5 }),
    scratchpad: fc.record(
      {
        schema: opt(fc.constant('opspad.scratchpad.v1')),
        goals: fc.array(padItem, { maxLength: 2 }),
        open_items: fc.array(padItem, { maxLength: 2 }),
        facts: fc.array(padFact, { maxLength: 2 }),
        refs: fc.array(padRef, { maxLength: 3 }),
      },
      { requiredKeys: [] },
    ),
    task: opt(shortText),
    reason: opt(shortText),
  },
  { requiredKeys: ['expected_version', 'scratchpad'] },
);
const validSettings = fc.record(
  {
    reorganize_every: fc.integer({ min: 0, max: 10 }),
    schema_retries: fc.integer({ min: 0, max: 5 }),
    max_recent_messages: fc.integer({ min: 0, max: 100 }),
  },
  { requiredKeys: [] },
);
const validReorganize = fc.record(
  {
    recent_messages: fc.array(fc.record({ role: fc.constantFrom('user', 'assistant'), content: shortText }), {
      maxLength: 3,
    }),
    reason: shortText,
  },
  { requiredKeys: [] },
);

// ─── Requests ────────────────────────────────────────────────────────────────────────────────

/** A path segment: text (already percent-encoded) or an id from a pool. */
type Segment = string | IdRef;

type Body = { kind: 'json'; node: Node } | { kind: 'bytes'; bytes: Uint8Array } | { kind: 'none' };

interface Case {
  method: string;
  path: readonly Segment[];
  query?: string;
  contentType?: string | null;
  execution?: Segment | null;
  body: Body;
}

const TOOL_NAMES = ['manage_assistant_operation', 'write_to_scratchpad', 'read_from_scratchpad', 'update_scratchpad'];
type BodyTarget =
  | 'operation'
  | 'write'
  | 'read'
  | 'update_scratchpad'
  | 'put_pad'
  | 'settings'
  | 'reorganize'
  | 'execution';

const conversationSegment: fc.Arbitrary<Segment> = fc.oneof(
  { arbitrary: idRef('conversation'), weight: 6 },
  { arbitrary: fc.uuid(), weight: 2 },
);

function bodyCase(target: BodyTarget, conversation: Segment, node: Body, execution: Segment | null = null): Case {
  const conv = ['/v1/conversations/', conversation] as const;
  const base = { body: node, execution } as const;
  switch (target) {
    case 'operation':
      return { ...base, method: 'POST', path: [...conv, '/tools/manage_assistant_operation'] };
    case 'write':
      return { ...base, method: 'POST', path: [...conv, '/tools/write_to_scratchpad'] };
    case 'read':
      return { ...base, method: 'POST', path: [...conv, '/tools/read_from_scratchpad'] };
    case 'update_scratchpad':
      return { ...base, method: 'POST', path: [...conv, '/tools/update_scratchpad'] };
    case 'put_pad':
      return { ...base, method: 'PUT', path: [...conv, '/scratchpad'] };
    case 'settings':
      return { ...base, method: 'PUT', path: [...conv, '/scratchpad/settings'] };
    case 'reorganize':
      return { ...base, method: 'POST', path: [...conv, '/scratchpad/reorganize'] };
    case 'execution':
      return { ...base, method: 'POST', path: [...conv, '/executions'] };
  }
}

const BODY_TARGETS: readonly BodyTarget[] = [
  'operation',
  'write',
  'read',
  'update_scratchpad',
  'put_pad',
  'settings',
  'reorganize',
  'execution',
];
const validBodyFor: Record<BodyTarget, fc.Arbitrary<unknown>> = {
  operation: validOperationInput,
  write: validWrite,
  read: validRead,
  update_scratchpad: validUpdateScratchpad,
  put_pad: validPutScratchpad,
  settings: validSettings,
  reorganize: validReorganize,
  execution: fc.constant({}),
};
/** A valid input for one of the body routes, as a case. */
/** A valid input for one of `targets`, as the parts of a case. */
const validCaseOf = (targets: readonly BodyTarget[]) =>
  fc.constantFrom(...targets).chain((target) =>
    fc
      .tuple(conversationSegment, validBodyFor[target], fc.option(idRef('execution'), { freq: 4 }))
      .map(([conversation, body, execution]) => ({
        target,
        conversation,
        node: toNode(body),
        execution: target === 'write' || target === 'read' ? execution : null,
      })),
  );
const validCase = validCaseOf(BODY_TARGETS);

// Mutations of a valid input: drop, retype, add, replace a string or a number, wrap, null, repeat.

type MutationKind = 'drop' | 'retype' | 'add' | 'string' | 'number' | 'wrap' | 'null' | 'repeat_key' | 'empty';
interface Mutation {
  at: number;
  kind: MutationKind;
  key: string;
  value: Node;
  text: string;
  number: Node;
}

const mutation = fc.record({
  at: fc.nat({ max: 40 }),
  kind: fc.constantFrom<MutationKind>(
    'drop',
    'retype',
    'add',
    'string',
    'number',
    'wrap',
    'null',
    'repeat_key',
    'empty',
  ),
  key: anyKey,
  value: jsonNode,
  text: weirdString,
  number: fc.oneof(edgeNumber as fc.Arbitrary<Node>, rawNumber),
});

function countPositions(node: Node): number {
  if (node instanceof Obj) {
    return 1 + node.entries.reduce((sum, [, value]) => sum + countPositions(value), 0);
  }
  if (Array.isArray(node)) {
    return 1 + node.reduce<number>((sum, value) => sum + countPositions(value), 0);
  }
  return 1;
}

/** Applies `m` at the `m.at`-th node of `root` (pre-order); `drop` removes it from its parent. */
function mutate(root: Node, m: Mutation): Node {
  const target = m.at % countPositions(root);
  let position = 0;
  const DROPPED = Symbol('dropped');
  const visit = (node: Node): Node | typeof DROPPED => {
    const here = position++;
    if (here === target) {
      switch (m.kind) {
        case 'drop':
          return DROPPED;
        case 'retype':
          return m.value;
        case 'add':
          return node instanceof Obj
            ? new Obj([...node.entries, [m.key, m.value]])
            : Array.isArray(node)
              ? [...node, m.value]
              : new Obj([[m.key, node]]);
        case 'string':
          return m.text;
        case 'number':
          return m.number;
        case 'wrap':
          return [node];
        case 'null':
          return null;
        case 'repeat_key': {
          const first = node instanceof Obj ? node.entries[0] : undefined;
          return first && node instanceof Obj ? new Obj([...node.entries, [first[0], m.value]]) : m.value;
        }
        case 'empty':
          return node instanceof Obj ? new Obj([]) : Array.isArray(node) ? [] : '';
      }
    }
    if (node instanceof Obj) {
      const entries: [string, Node][] = [];
      for (const [key, value] of node.entries) {
        const next = visit(value);
        if (next !== DROPPED) {
          entries.push([key, next]);
        }
      }
      return new Obj(entries);
    }
    if (Array.isArray(node)) {
      const items: Node[] = [];
      for (const value of node) {
        const next = visit(value);
        if (next !== DROPPED) {
          items.push(next);
        }
      }
      return items;
    }
    return node;
  };
  const result = visit(root);
  return result === DROPPED ? new Obj([]) : result;
}

// ─── The run ─────────────────────────────────────────────────────────────────────────────────

interface Victim {
  tenant: Tenant;
  conversationId: string;
  operationIds: string[];
  executionId: string;
  /** Texts only the victim's rows hold: no answer to the fuzzer may contain one. */
  secrets: string[];
}

interface Stats {
  cases: number;
  byStatus: Map<number, number>;
}

/** The prototype chain objects a pollution would show on, and their own keys before the run. */
function prototypeKeys(): Record<string, string[]> {
  return {
    object: Object.getOwnPropertyNames(Object.prototype).sort(),
    array: Object.getOwnPropertyNames(Array.prototype).sort(),
    function: Object.getOwnPropertyNames(Function.prototype).sort(),
  };
}

const PROTOTYPE_KEYS_BEFORE = prototypeKeys();
/** The pollution payload: any of these showing on `{}` means a prototype was written. */
const POLLUTION_MARKERS = ['opspadPolluted', 'isAdmin', 'polluted'];

const ENGINE_RUNS: { engine: Engine; share: number }[] = [
  { engine: 'postgres', share: 1 },
  { engine: 'pglite', share: PGLITE_SHARE },
];

describe.each(ENGINE_RUNS)('fuzzing every input on $engine', ({ engine, share }) => {
  let harness: Harness;
  let client: RawClient;
  let fuzzer: Tenant;
  let victim: Victim;
  let pools: Record<PoolName, string[]>;
  /** The fuzzer's rows after the last call that was accepted. */
  let baseline: Digest;
  /** Every row but the fuzzer's (the victim's, earlier fuzzers'), before the property. */
  let othersBefore: Digest;
  /** Postgres: the file's own database. */
  let database: Awaited<ReturnType<typeof privatePostgresDatabase>> | undefined;
  const stats: Stats = { cases: 0, byStatus: new Map() };

  const runs = (count: number) => Math.max(1, Math.round(count * share * SCALE));

  /** Every row but the fuzzer's: both engines have a database of their own here. */
  async function othersDigest(): Promise<Digest> {
    return (await ownAndOthersDigests(harness.db, fuzzer.organizationId)).others;
  }

  beforeAll(async () => {
    database = engine === 'postgres' ? await privatePostgresDatabase('fuzz') : undefined;
    harness = await startHarness(engine, {
      env: { OPSPAD_RATE_LIMIT: '1000000/1s' },
      databaseUrl: database?.url,
    });
    client = rawClient(harness.url);
    victim = await seedVictim(harness);
    expect(await uncoveredTables(harness.db)).toEqual([]);
  });

  /**
   * Each property fuzzes as an organization of its own, so the digest taken after every call
   * reads only the rows that property made. Its data: an active operation with a batch leased,
   * an execution, a pad.
   */
  beforeEach(async () => {
    fuzzer = await harness.newTenant();
    const conversation = randomUUID();
    const created = await fuzzer.op(conversation, {
      action: 'create',
      operation_type: 'fuzz_seed',
      total_items: 20,
      item_ids: ids(20, 'f'),
      batch_size: 3,
    });
    expect(created.status).toBe(200);
    await fuzzer.op(conversation, { action: 'progress' });
    const execution = await fuzzer.post(`/v1/conversations/${conversation}/executions`);
    expect(execution.status).toBe(201);
    const pad = await fuzzer.tool(
      conversation,
      { task: 'fuzz', add: { open_items: [{ text: 'x' }] } },
      'update_scratchpad',
    );
    expect(pad.status).toBe(200);
    pools = {
      conversation: [conversation, randomUUID(), victim.conversationId, victim.conversationId.toUpperCase()],
      operation: [
        created.body.operation_id as string,
        ...victim.operationIds,
        (victim.operationIds[0] as string).toUpperCase(),
      ],
      execution: [execution.body.execution_id as string, victim.executionId, victim.executionId.toUpperCase()],
      item: [...ids(20, 'f'), 'victim-item-1', 'f-404'],
    };
    baseline = await organizationDigest(harness.db, fuzzer.organizationId);
    othersBefore = await othersDigest();
  });

  afterAll(async () => {
    client?.close();
    await harness?.close();
    await database?.drop();
  });

  function toRequest(c: Case): RawRequest {
    const path = c.path.map((segment) => (typeof segment === 'string' ? segment : resolve(segment, pools))).join('');
    const headers: Record<string, string> = { authorization: `Bearer ${fuzzer.apiKey}` };
    if (c.execution !== undefined && c.execution !== null) {
      headers['x-opspad-execution'] = typeof c.execution === 'string' ? c.execution : resolve(c.execution, pools);
    }
    let body: string | Buffer | undefined;
    if (c.body.kind === 'json') {
      body = serialize(c.body.node, pools);
    } else if (c.body.kind === 'bytes') {
      body = Buffer.from(c.body.bytes);
    }
    if (body !== undefined && c.contentType !== null) {
      headers['content-type'] = c.contentType ?? 'application/json';
    }
    return { method: c.method, path: `${path}${c.query ?? ''}`, headers, body };
  }

  /** New ids the fuzzer got back join its pools, so later cases act on them. */
  function learn(json: unknown) {
    if (json === null || typeof json !== 'object') {
      return;
    }
    const body = json as Record<string, unknown>;
    const add = (pool: PoolName, value: unknown) => {
      if (typeof value === 'string' && !pools[pool].includes(value)) {
        pools[pool].splice(1, pools[pool].length >= 12 ? 1 : 0, value);
      }
    };
    add('operation', body.operation_id);
    add('execution', body.execution_id);
  }

  function describeCall(request: RawRequest, response: RawResponse): string {
    const body = request.body === undefined ? '' : preview(request.body.toString());
    return `${request.method} ${preview(request.path)} ${JSON.stringify(request.headers)} ${body} → ${response.status} ${preview(response.text)}`;
  }

  /** Sends one case and checks everything a single call must satisfy. */
  async function exercise(c: Case): Promise<RawResponse> {
    const request = toRequest(c);
    const response = await client.send(request);
    stats.cases++;
    stats.byStatus.set(response.status, (stats.byStatus.get(response.status) ?? 0) + 1);
    const call = describeCall(request, response);

    // 2xx or 4xx, never 5xx (nor 1xx/3xx).
    const accepted = response.status >= 200 && response.status < 300;
    if (!accepted && !(response.status >= 400 && response.status < 500)) {
      throw new Error(`status ${response.status}: ${call}`);
    }
    if (accepted) {
      if (!String(response.headers['content-type']).startsWith('text/event-stream')) {
        expect(response.json, call).toBeTypeOf('object');
        expect(response.json, call).not.toBeNull();
      }
    } else {
      expect(String(response.headers['content-type']), call).toMatch(/^application\/json/);
      const body = response.json as { error?: Record<string, unknown> };
      expect(Object.keys(body ?? {}), call).toEqual(['error']);
      const error = body.error as Record<string, unknown>;
      expect(Object.keys(error).sort(), call).toEqual(['code', 'details', 'message']);
      expect(Object.hasOwn(ERROR_CODES, error.code as string), call).toBe(true);
      expect(ERROR_CODES[error.code as keyof typeof ERROR_CODES], call).toBe(response.status);
      expect(error.message, call).toBeTypeOf('string');
      expect((error.message as string).length, call).toBeGreaterThan(0);
      expect(error.details, call).toBeTypeOf('object');
      expect(error.details, call).not.toBeNull();
    }

    // Never the victim's data: its secrets never, its ids only when the request named them.
    const answered = response.text.toLowerCase();
    const asked = `${request.path} ${JSON.stringify(request.headers)} ${request.body?.toString() ?? ''}`.toLowerCase();
    for (const secret of victim.secrets) {
      if (answered.includes(secret.toLowerCase()) && !asked.includes(secret.toLowerCase())) {
        throw new Error(`the answer holds the victim's "${secret}": ${call}`);
      }
    }

    // A rejected call writes nothing; an accepted one moves the baseline.
    const after = await organizationDigest(harness.db, fuzzer.organizationId);
    if (accepted) {
      baseline = after;
      learn(response.json);
    } else if (after.sha256 !== baseline.sha256) {
      const before = baseline;
      baseline = after;
      throw new Error(`a rejected call changed the fuzzer's rows (${before.rows} → ${after.rows} rows): ${call}`);
    }
    for (const marker of POLLUTION_MARKERS) {
      if (marker in {}) {
        throw new Error(`Object.prototype was polluted with "${marker}": ${call}`);
      }
    }
    return response;
  }

  /** Runs `numRuns` cases of `arb`, then checks that nobody else's rows changed. */
  async function fuzz(arb: fc.Arbitrary<Case>, numRuns: number) {
    await fc.assert(
      fc.asyncProperty(arb, async (c) => {
        await exercise(c);
      }),
      { numRuns: runs(numRuns), seed: SEED, endOnFailure: true },
    );
    expect(await othersDigest()).toEqual(othersBefore);
    expect(prototypeKeys()).toEqual(PROTOTYPE_KEYS_BEFORE);
  }

  it('answers random JSON bodies on every tool and REST body route with 4xx or a valid 2xx', async () => {
    const arb = fc
      .tuple(fc.constantFrom(...BODY_TARGETS), conversationSegment, jsonNode, fc.option(idRef('execution')))
      .map(([target, conversation, node, execution]) =>
        bodyCase(target, conversation, { kind: 'json', node }, execution),
      );
    await fuzz(arb, 1800);
  });

  it('answers objects of known fields with random values', async () => {
    const arb = fc
      .tuple(fc.constantFrom(...BODY_TARGETS), conversationSegment, structuredObject, fc.option(idRef('execution')))
      .map(([target, conversation, node, execution]) =>
        bodyCase(target, conversation, { kind: 'json', node }, execution),
      );
    await fuzz(arb, 1800);
  });

  const MUTATION_GROUPS: { name: string; targets: readonly BodyTarget[] }[] = [
    { name: 'manage_assistant_operation', targets: ['operation'] },
    { name: 'the scratchpad tools', targets: ['write', 'read', 'update_scratchpad'] },
    { name: 'the REST bodies', targets: ['put_pad', 'settings', 'reorganize', 'execution'] },
  ];
  it.each(MUTATION_GROUPS)(
    'answers mutations of valid inputs of $name (a field dropped, retyped, added, repeated)',
    async ({ targets }) => {
      const arb = fc
        .tuple(validCaseOf(targets), fc.array(mutation, { minLength: 0, maxLength: 3 }))
        .map(([valid, mutations]) =>
          bodyCase(
            valid.target,
            valid.conversation,
            { kind: 'json', node: mutations.reduce(mutate, valid.node) },
            valid.execution,
          ),
        );
      await fuzz(arb, 1000);
    },
  );

  it('answers unicode in every string field: lone surrogates, U+0000, astral and invisible characters', async () => {
    const arb = fc
      .tuple(validCase, fc.array(fc.tuple(fc.nat({ max: 40 }), unicodeString), { minLength: 1, maxLength: 3 }))
      .map(([valid, replacements]) => {
        const node = replacements.reduce(
          (n, [at, text]) => mutate(n, { at, kind: 'string', key: '', value: null, text, number: 0 }),
          valid.node,
        );
        return bodyCase(valid.target, valid.conversation, { kind: 'json', node }, valid.execution);
      });
    await fuzz(arb, 1000);
  });

  it('answers prototype-pollution keys sent as raw JSON (own "__proto__", "constructor", "prototype" keys)', async () => {
    const payload = fc.oneof(
      fc.constant(new Obj([['opspadPolluted', 'yes']])),
      fc.constant(new Obj([['prototype', new Obj([['isAdmin', true]])]])),
      fc.constant(new Obj([['polluted', new Obj([['opspadPolluted', 1]])]])),
      jsonNode,
    );
    const arb = fc
      .tuple(
        validCase,
        fc.array(fc.tuple(fc.nat({ max: 40 }), fc.constantFrom(...PROTO_KEYS), payload), {
          minLength: 1,
          maxLength: 3,
        }),
      )
      .map(([valid, injections]) => {
        const node = injections.reduce(
          (n, [at, key, value]) => mutate(n, { at, kind: 'add', key, value, text: '', number: 0 }),
          valid.node,
        );
        return bodyCase(valid.target, valid.conversation, { kind: 'json', node }, valid.execution);
      });
    await fuzz(arb, 800);
    for (const marker of POLLUTION_MARKERS) {
      expect(marker in {}).toBe(false);
      expect(marker in []).toBe(false);
      expect(marker in Object.create({})).toBe(false);
    }
  });

  it('answers raw bodies: broken JSON, bytes that are not UTF-8, odd content types and encodings', async () => {
    const validText = validCase.map((v) => serialize(v.node, PREVIEW_POOLS));
    const bodyText = fc.oneof(
      fc.constantFrom(
        '',
        'null',
        '[]',
        '{}',
        '"text"',
        '42',
        'true',
        '{"a":1,}',
        "{'action':'progress'}",
        'NaN',
        '{"action":"progress"}garbage',
        '{"action":"progress"',
        '\ufeff{"action":"progress"}',
        '{"action":"progress","action":"create"}',
        '{"action":"get","failures_limit":1e400}',
        '{"__proto__":{"opspadPolluted":true},"action":"progress"}',
        '{"constructor":{"prototype":{"opspadPolluted":true}},"action":"progress"}',
        '[{"action":"progress"}]',
        '{"action":"\\ud800"}',
        '{"action":"progress\\u0000"}',
      ),
      validText.chain((text) => fc.nat({ max: text.length }).map((cut) => text.slice(0, cut))),
      validText,
      fc.string({ unit: 'binary', maxLength: 200 }),
    );
    const bytes = fc.oneof(
      bodyText.map((text) => new Uint8Array(Buffer.from(text))),
      fc.uint8Array({ maxLength: 300 }),
      fc.tuple(bodyText, fc.uint8Array({ minLength: 1, maxLength: 4 }), fc.nat()).map(([text, junk, at]) => {
        const buffer = Buffer.from(text);
        const cut = buffer.length === 0 ? 0 : at % buffer.length;
        return new Uint8Array(Buffer.concat([buffer.subarray(0, cut), Buffer.from(junk), buffer.subarray(cut)]));
      }),
      fc.constant(new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d])),
      fc.constant(new Uint8Array(Buffer.from('{"notes":"\xff\xfe"}', 'latin1'))),
    );
    const contentType = fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=utf-16',
      'application/json; charset=latin1',
      'application/json; charset=bogus',
      'APPLICATION/JSON',
      'application/vnd.api+json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/octet-stream',
      '*/*',
      'json',
      null,
    );
    const arb = fc
      .tuple(
        fc.constantFrom(...BODY_TARGETS),
        conversationSegment,
        bytes,
        contentType,
        fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'),
      )
      .map(([target, conversation, raw, type, method]) => {
        const c = bodyCase(target, conversation, { kind: 'bytes', bytes: raw });
        return { ...c, contentType: type, method: method === c.method || method === 'POST' ? c.method : method };
      });
    await fuzz(arb, 800);
  });

  it('answers odd paths, query strings and X-Opspad-Execution headers on every route', async () => {
    const segment: fc.Arbitrary<Segment> = fc.oneof(
      { arbitrary: anyIdRef, weight: 5 },
      { arbitrary: fc.uuid().map((u) => u.toUpperCase()), weight: 1 },
      { arbitrary: weirdString.map((s) => encodeURIComponent(wellFormed(s)).slice(0, 2000)), weight: 3 },
      {
        arbitrary: fc.constantFrom(
          '%',
          '%zz',
          '%E0%A4%A',
          '%00',
          '%2F',
          '..',
          '.',
          '%2e%2e',
          '%C0%AF',
          '%ED%A0%80',
          '',
        ),
        weight: 2,
      },
    );
    const queryValue = fc.oneof(
      fc.integer({ min: -5, max: 2000 }).map(String),
      fc.constantFrom('', '1.5', '1e3', '-0', 'NaN', 'Infinity', '0x10', '%207', '99999999999999999999', '%', '%zz'),
      weirdString.map((s) => encodeURIComponent(wellFormed(s)).slice(0, 200)),
    );
    const queryKey = fc.oneof(
      fc.constantFrom('after', 'before', 'limit', 'limit[]', 'limit[a]', '__proto__', 'constructor[prototype]', 'x'),
      weirdString.map((s) => encodeURIComponent(wellFormed(s)).slice(0, 50)),
    );
    const query = fc
      .array(fc.tuple(queryKey, queryValue), { maxLength: 4 })
      .map((pairs) => (pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`));
    const header = fc.oneof(
      anyIdRef,
      fc.uuid(),
      fc.constantFrom('', ' ', 'not-a-uuid', '00000000-0000-0000-0000-000000000000'),
      fc.string({ unit: 'grapheme-ascii', maxLength: 60 }),
    );
    const route = fc.oneof(
      segment.map((s) => ({ method: 'GET', path: ['/v1/conversations/', s, '/context'] })),
      segment.map((s) => ({ method: 'GET', path: ['/v1/conversations/', s, '/scratchpad'] })),
      segment.map((s) => ({ method: 'GET', path: ['/v1/conversations/', s, '/scratchpad/versions'] })),
      segment.map((s) => ({ method: 'GET', path: ['/v1/conversations/', s, '/scratchpad/events'] })),
      segment.map((s) => ({ method: 'GET', path: ['/v1/conversations/', s, '/context-renders'] })),
      segment.map((s) => ({ method: 'POST', path: ['/v1/conversations/', s, '/executions'] })),
      segment.map((s) => ({ method: 'POST', path: ['/v1/executions/', s, '/end'] })),
      segment.map((s) => ({ method: 'GET', path: ['/v1/executions/', s, '/traces'] })),
      segment.map((s) => ({ method: 'GET', path: ['/v1/operations/', s] })),
      segment.map((s) => ({ method: 'GET', path: ['/v1/operations/', s, '/events'] })),
      fc.tuple(segment, fc.oneof(fc.constantFrom(...TOOL_NAMES), segment)).map(([s, tool]) => ({
        method: 'POST',
        path: ['/v1/conversations/', s, '/tools/', tool],
      })),
      fc.constant({ method: 'GET', path: ['/v1/tools'] }),
      fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => ({
        method: 'GET',
        path: parts.flatMap((p) => ['/', p]),
      })),
    );
    const arb = fc.tuple(route, query, fc.option(header), fc.option(jsonNode, { freq: 3 })).map(
      ([r, q, execution, node]): Case => ({
        method: r.method,
        path: r.path,
        query: q,
        execution,
        body: node === null ? { kind: 'none' } : { kind: 'json', node },
      }),
    );
    await fuzz(arb, 1200);
  });

  it('answers strings of up to 1 MB in every string field', async () => {
    const huge = fc
      .tuple(fc.integer({ min: 100_000, max: 1_000_000 }), fc.constantFrom('x', 'é', '\u{1f600}', '\ud800', '\u0000'))
      .map(([length, unit]) => unit.repeat(Math.ceil(length / unit.length)));
    const arb = fc.tuple(validCase, fc.nat({ max: 40 }), huge).map(([valid, at, text]) => {
      const node = mutate(valid.node, { at, kind: 'string', key: '', value: null, text, number: 0 });
      return bodyCase(valid.target, valid.conversation, { kind: 'json', node }, valid.execution);
    });
    await fuzz(arb, 40);
  });

  it('answers JSON nested 10,000 levels deep and more, anywhere in the body', async () => {
    const deep = fc
      .tuple(fc.constantFrom(10_000, 10_000, 50_000, 100_000), fc.constantFrom('array', 'object', 'mixed'))
      .map(([depth, shape]) => {
        const open = shape === 'array' ? '[' : shape === 'object' ? '{"a":' : '[{"b":';
        const close = shape === 'array' ? ']' : shape === 'object' ? '}' : '}]';
        const levels = shape === 'mixed' ? depth / 2 : depth;
        return new RawJson(`${open.repeat(levels)}1${close.repeat(levels)}`);
      });
    const arb = fc.tuple(validCase, fc.nat({ max: 40 }), deep, fc.boolean()).map(([valid, at, nested, whole]) => {
      const node = whole
        ? nested
        : mutate(valid.node, { at, kind: 'retype', key: '', value: nested, text: '', number: 0 });
      return bodyCase(valid.target, valid.conversation, { kind: 'json', node }, valid.execution);
    });
    await fuzz(arb, 30);
    // query_params takes any JSON: nested deep there, on purpose.
    const createDeep = deep.map(
      (nested): Case =>
        bodyCase('operation', new IdRef('conversation', 1), {
          kind: 'json',
          node: new Obj([
            ['action', 'create'],
            ['operation_type', 'deep'],
            ['total_items', 1],
            ['item_ids', ['d-1']],
            ['query_params', new Obj([['filter', nested]])],
          ]),
        }),
    );
    await fuzz(createDeep, 8);
  });

  describe('counterexamples the fuzzer found, replayed every run', () => {
    const json = (conversation: string, name: string, text: string): Case => ({
      method: 'POST',
      path: ['/v1/conversations/', conversation, `/tools/${name}`],
      body: { kind: 'json', node: new RawJson(text) },
    });
    const expectRefused = (response: RawResponse, field: string, message: string) => {
      expect(response.status, response.text).toBe(400);
      const { error } = response.json as { error: { code: string; message: string; details: unknown } };
      expect(error.code).toBe('validation_failed');
      expect(error.message).toContain(field);
      expect(error.message).toContain(message);
    };

    it('reorganizing the pad of a conversation not used yet (was a foreign-key error, 500)', async () => {
      const response = await exercise({
        method: 'POST',
        path: ['/v1/conversations/', randomUUID(), '/scratchpad/reorganize'],
        body: { kind: 'json', node: new Obj([['reason', 'first call']]) },
      });
      expect(response.status, response.text).toBe(200);
      expect(response.json).toMatchObject({ status: 'missing_scratchpad' });
    });

    it('a path that is not valid percent-encoding (was a URIError, 500)', async () => {
      for (const bad of ['%E0%A4%A', '%C0%AF', '%']) {
        const response = await exercise({
          method: 'GET',
          path: ['/v1/conversations/', bad, '/context'],
          body: { kind: 'none' },
        });
        expectRefused(response, '', 'percent-encoded');
      }
    });

    it('lone surrogates (were a jsonb syntax error, 500, or stored as U+FFFD in text)', async () => {
      const conversation = randomUUID();
      expectRefused(
        await exercise(json(conversation, 'update_scratchpad', '{"add":{"goals":[{"text":"a\\ud800b"}]}}')),
        'add.goals[0].text',
        'lone UTF-16 surrogate',
      );
      expectRefused(
        await exercise(json(conversation, 'write_to_scratchpad', '{"notes":"half \\udc00 a pair"}')),
        'notes',
        'lone UTF-16 surrogate',
      );
      expectRefused(
        await exercise(
          json(
            conversation,
            'manage_assistant_operation',
            '{"action":"create","operation_type":"t","total_items":1,"item_ids":["x"],"query_params":{"\\udbff":1}}',
          ),
        ),
        'query_params',
        'field names must not contain a lone UTF-16 surrogate',
      );
      // A surrogate pair is one valid character, and is stored as sent.
      const pair = await exercise(json(conversation, 'write_to_scratchpad', '{"notes":"smile \\ud83d\\ude00"}'));
      expect(pair.status, pair.text).toBe(200);
      const read = await exercise(json(conversation, 'read_from_scratchpad', '{}'));
      expect((read.json as { result: string }).result).toContain('smile \u{1f600}');
    });

    it('query_params nested 10,000 levels deep (was a stack overflow, 500); 90 levels are fine', async () => {
      const create = (depth: number) =>
        json(
          randomUUID(),
          'manage_assistant_operation',
          `{"action":"create","operation_type":"t","total_items":1,"item_ids":["x"],"query_params":{"f":${'['.repeat(depth)}${']'.repeat(depth)}}}`,
        );
      expectRefused(await exercise(create(10_000)), 'query_params.f', 'must not nest deeper than 100 levels');
      const fine = await exercise(create(90));
      expect(fine.status, fine.text).toBe(200);
    });
  });

  it("answered every case, left the victim's rows and Object.prototype as they were", async () => {
    expect(await othersDigest()).toEqual(othersBefore);
    expect(prototypeKeys()).toEqual(PROTOTYPE_KEYS_BEFORE);
    // The victim's operations still answer the victim as before.
    const active = await victim.tenant.op(victim.conversationId, { action: 'get' });
    expect(active.body).toMatchObject({ operation_id: victim.operationIds[1], status: 'active', in_flight_count: 3 });
    const statuses = Object.fromEntries([...stats.byStatus.entries()].sort(([a], [b]) => a - b));
    console.log(`fuzz on ${engine}: ${stats.cases} cases, statuses ${JSON.stringify(statuses)}`);
    expect(stats.cases).toBeGreaterThanOrEqual(runs(10_400));
    // Both kinds of answers were exercised: the fuzzer got past validation often enough.
    expect(stats.byStatus.get(200) ?? 0).toBeGreaterThan(runs(300));
  });
});

/** An organization with data of every kind, whose ids the fuzzer aims at. */
async function seedVictim(harness: Harness): Promise<Victim> {
  const tenant = await harness.newTenant();
  const conversationId = randomUUID();
  const secret = `victim-secret-${randomUUID()}`;
  const first = await tenant.op(conversationId, {
    action: 'create',
    operation_type: 'victim_sms',
    total_items: 4,
    item_ids: ['victim-item-1', 'victim-item-2', 'victim-item-3', 'victim-item-4'],
    query_params: { secret },
    notes: `${secret}-notes`,
  });
  expect(first.status).toBe(200);
  const paused = first.body.operation_id as string;
  await tenant.op(conversationId, {
    action: 'update',
    operation_id: paused,
    completed_ids: ['victim-item-1'],
    failed: [{ id: 'victim-item-2', reason: `${secret}-reason` }],
  });
  const second = await tenant.op(conversationId, {
    action: 'create',
    operation_type: 'victim_tag',
    total_items: 6,
    item_ids: ids(6, 'victim-lead'),
    batch_size: 3,
  });
  const active = second.body.operation_id as string;
  expect((await tenant.op(conversationId, { action: 'progress' })).body.batch).toHaveLength(3);
  const execution = await tenant.post(`/v1/conversations/${conversationId}/executions`);
  const executionId = execution.body.execution_id as string;
  expect(
    (
      await tenant.tool(conversationId, { notes: `${secret}-execution-note` }, 'write_to_scratchpad', {
        'x-opspad-execution': executionId,
      })
    ).status,
  ).toBe(200);
  await tenant.tool(conversationId, { persistent_notes: `${secret}-persistent` }, 'read_from_scratchpad');
  const pad = await tenant.tool(
    conversationId,
    {
      task: `${secret}-task`,
      add: {
        facts: [{ text: `${secret}-fact`, source_ref: `operation:${paused}` }],
        refs: [{ id: `operation:${paused}`, kind: 'operation' }],
      },
    },
    'update_scratchpad',
  );
  expect(pad.status, JSON.stringify(pad.body)).toBe(200);
  expect((await tenant.context(conversationId)).status).toBe(200);
  return {
    tenant,
    conversationId,
    operationIds: [paused, active],
    executionId,
    secrets: [secret, 'victim_sms', 'victim_tag', 'victim-lead', 'victim-item-2', 'victim-item-3'],
  };
}
