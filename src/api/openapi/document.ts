/**
 * The OpenAPI 3.1 document of opspad's HTTP API, generated from the route table (routes.ts) and
 * the zod schemas it names (`z.toJSONSchema`, JSON Schema 2020-12 as OpenAPI 3.1 uses it): request
 * bodies and parameters as the routes accept them (`io: 'input'`: defaults make a field
 * optional), answers as the server sends them (`io: 'output'`). Served at `/openapi.json`,
 * printed by `opspad openapi print`, rendered at `/docs`.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../../domain/errors.ts';
import { OperationAuditEvent } from '../../domain/operation-output.ts';
import type { Auth, Named, RouteSpec } from './route-spec.ts';
import { ErrorBody, ROUTES } from './routes.ts';

export type JsonObject = { [key: string]: unknown };

/** package.json sits two folders above this module, in the sources and in dist/ alike. */
function packageVersion(): string {
  const url = new URL('../../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

function toJsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonObject {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonObject;
  if ('$defs' in json) {
    // A $ref into "#/$defs/…" would point at the document's root once nested under components.
    throw new Error('OpenAPI: a schema produced $defs (a recursive or registered schema); describe it without.');
  }
  return json;
}

/** `/v1/operations/:operationId` → `/v1/operations/{operationId}`. */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z_]\w*)/g, '{$1}');
}

const SECURITY: Record<Auth, JsonObject[]> = {
  apiKey: [{ apiKey: [] }],
  operator: [{ operator: [] }],
  none: [],
};

const STATUS_TEXT: Record<number, string> = {
  400: 'The request is invalid: the error names the field, what was wrong and what to do. Nothing was changed.',
  401: 'No valid credentials.',
  404: 'Not found — also for another organization’s ids.',
  409: 'Refused in the current state (the message says what to do).',
  429: 'Too many requests with this key: retry after Retry-After seconds.',
  500: 'opspad failed; retry, and report it if it persists.',
  503: 'opspad cannot serve now (shutting down, or a dependency is down).',
};

class Components {
  readonly schemas: Record<string, JsonObject> = {};
  private readonly sources = new Map<string, z.ZodType>();

  /** Registers `named` (once per name) and answers a reference to it. */
  ref(named: Named, io: 'input' | 'output'): JsonObject {
    const known = this.sources.get(named.name);
    if (known && known !== named.schema) {
      throw new Error(`OpenAPI: two different schemas are named ${named.name}`);
    }
    if (!known) {
      this.sources.set(named.name, named.schema);
      this.schemas[named.name] = toJsonSchema(named.schema, io);
    }
    return { $ref: `#/components/schemas/${named.name}` };
  }
}

function parameters(route: RouteSpec): JsonObject[] {
  const list: JsonObject[] = [];
  const add = (where: 'path' | 'query', object: z.ZodObject | undefined) => {
    if (!object) {
      return;
    }
    const json = toJsonSchema(object, 'input') as { properties?: Record<string, JsonObject>; required?: string[] };
    for (const [name, schema] of Object.entries(json.properties ?? {})) {
      const { description, ...rest } = schema;
      list.push({
        name,
        in: where,
        required: where === 'path' || (json.required ?? []).includes(name),
        ...(typeof description === 'string' ? { description } : {}),
        schema: rest,
      });
    }
  };
  add('path', route.params);
  add('query', route.query);
  for (const header of route.headers ?? []) {
    list.push({
      name: header.name,
      in: 'header',
      required: false,
      description: header.description,
      schema: toJsonSchema(header.schema, 'input'),
    });
  }
  return list;
}

function errorResponses(codes: readonly ErrorCode[], components: Components): Record<string, JsonObject> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = ERROR_CODES[code];
    byStatus.set(status, [...new Set([...(byStatus.get(status) ?? []), code])]);
  }
  const responses: Record<string, JsonObject> = {};
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[String(status)] = {
      description: `${STATUS_TEXT[status] ?? 'Error.'} Codes: ${list.map((c) => `\`${c}\``).join(', ')}.`,
      ...(status === 429
        ? { headers: { 'Retry-After': { description: 'Seconds to wait.', schema: { type: 'integer' } } } }
        : {}),
      content: { 'application/json': { schema: components.ref({ name: 'ErrorBody', schema: ErrorBody }, 'output') } },
    };
  }
  return responses;
}

function operation(route: RouteSpec, components: Components): JsonObject {
  const responses: Record<string, JsonObject> = {};
  for (const [status, response] of Object.entries(route.responses)) {
    // JSON, another media type, or both (negotiated: `GET /`).
    const content = {
      ...(response.json ? { 'application/json': { schema: components.ref(response.json, 'output') } } : {}),
      ...Object.fromEntries(
        [response.other ?? []].flat().map((other) => [
          other.contentType,
          {
            schema: {
              type: other.contentType === 'application/json' ? 'object' : 'string',
              ...(other.description ? { description: other.description } : {}),
            },
          },
        ]),
      ),
    };
    responses[status] = {
      description: response.description,
      ...(response.headers ? { headers: response.headers } : {}),
      ...(Object.keys(content).length > 0 ? { content } : {}),
    };
  }
  Object.assign(responses, errorResponses(route.errors, components));
  const params = parameters(route);
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [route.tag],
    security: SECURITY[route.auth],
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(route.body
      ? {
          requestBody: {
            required: route.body.required,
            content: {
              [route.body.contentType ?? 'application/json']: { schema: components.ref(route.body, 'input') },
            },
          },
        }
      : {}),
    responses,
  };
}

const DESCRIPTION = [
  'Durable working memory for AI assistants doing bulk work. Every `/v1` call carries an organization’s API key as `Authorization: Bearer opk_…`; conversation ids are UUIDs the caller chooses.',
  'Every refusal is `{"error": {"code", "message", "details"}}` (ErrorBody) with a 4xx naming the field at fault; bad input changes nothing. Another organization’s ids answer 404, exactly as ids that do not exist.',
].join('\n\n');

/** The whole document. Built anew on each call (about a millisecond); callers may cache it. */
export function openApiDocument(): JsonObject {
  const components = new Components();
  const paths: Record<string, Record<string, JsonObject>> = {};
  for (const route of ROUTES) {
    const path = openApiPath(route.path);
    paths[path] ??= {};
    paths[path][route.method] = operation(route, components);
  }
  components.ref({ name: 'OperationAuditEvent', schema: OperationAuditEvent }, 'output');
  return {
    openapi: '3.1.0',
    info: {
      title: 'opspad',
      version: packageVersion(),
      description: DESCRIPTION,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    tags: [
      { name: 'Tools', description: 'The tools a model calls, and their definitions.' },
      { name: 'Operations', description: 'Operations by id: status and live progress.' },
      { name: 'Context', description: 'What the assistant is told every turn.' },
      {
        name: 'MCP',
        description:
          'opspad’s MCP server over Streamable HTTP, for hosted assistants: an API key or an OAuth access token (docs/assistants.md, Hosted assistants).',
      },
      { name: 'Scratchpad', description: 'The structured scratchpad: goals, open items, facts, refs.' },
      { name: 'Notes', description: 'Executions of the notes scratchpad.' },
      { name: 'Health', description: 'Liveness and readiness.' },
      { name: 'Reference', description: 'This document, and the index of where things are.' },
      {
        name: 'Operator',
        description: 'Operator pages, behind basic auth (OPSPAD_ADMIN_USER, OPSPAD_ADMIN_PASSWORD).',
      },
    ],
    paths,
    components: {
      schemas: components.schemas,
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key from `opspad keys create` (opk_…); on /mcp, also an OAuth access token (opa_…).',
        },
        operator: { type: 'http', scheme: 'basic', description: 'OPSPAD_ADMIN_USER and OPSPAD_ADMIN_PASSWORD.' },
      },
    },
  };
}
