/**
 * Holding real requests and answers against the OpenAPI document: a `fetch` that records every
 * exchange, and a check that each one is described — its path and method, parameters, body, the
 * status it got, and its JSON validating against the schema of that status (ajv, JSON Schema
 * 2020-12 as OpenAPI 3.1 uses it).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { JsonObject } from '../../src/api/openapi/document.ts';

export interface Exchange {
  method: string;
  url: URL;
  requestHeaders: Headers;
  /** Parsed JSON for a JSON request, the text for any other body. */
  requestBody: unknown;
  status: number;
  contentType: string;
  /** Parsed JSON, when the answer was JSON. */
  responseBody: unknown;
}

/** A fetch that records each exchange into `log` (event streams: status and type only). */
export function recordingFetch(log: Exchange[]): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const requestText = init?.body === undefined || init.body === null ? '' : String(init.body);
    const response = await fetch(request);
    const contentType = response.headers.get('content-type') ?? '';
    let responseBody: unknown;
    if (contentType.startsWith('application/json')) {
      responseBody = await response.clone().json();
    }
    log.push({
      method: request.method,
      url: new URL(request.url),
      requestHeaders: request.headers,
      requestBody: !requestText
        ? undefined
        : request.headers.get('content-type')?.startsWith('application/json')
          ? JSON.parse(requestText)
          : requestText,
      status: response.status,
      contentType,
      responseBody,
    });
    return response;
  };
}

type Operation = {
  parameters?: { name: string; in: string; required?: boolean; schema: JsonObject }[];
  requestBody?: { content: Record<string, { schema: JsonObject }> };
  responses: Record<string, { content?: Record<string, { schema: JsonObject }> }>;
};

// ajv-formats is CommonJS: its function arrives as the default export or as the module itself.
type FormatsPlugin = (ajv: Ajv2020) => Ajv2020;
const addFormats = ((addFormatsModule as unknown as { default?: FormatsPlugin }).default ??
  addFormatsModule) as unknown as FormatsPlugin;

export function createExchangeChecker(document: JsonObject) {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  addFormats(ajv);
  // Parameters arrive as strings: compare them after the coercion the routes apply.
  const coercing = new Ajv2020({ allErrors: true, strict: false, coerceTypes: true });
  addFormats(coercing);
  const schemas = (document.components as { schemas: Record<string, JsonObject> }).schemas;
  const resolve = (schema: JsonObject): JsonObject => {
    const ref = schema.$ref;
    return typeof ref === 'string' ? (schemas[ref.replace('#/components/schemas/', '')] as JsonObject) : schema;
  };
  const paths = document.paths as Record<string, Record<string, Operation>>;
  // Concrete paths before templated ones, as OpenAPI matches them.
  const templates = Object.keys(paths).sort(
    (a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0) || b.length - a.length,
  );
  const matchers = templates.map((template) => ({
    template,
    names: [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string),
    regex: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{\w+\\?\}/g, '([^/]+)')}$`),
  }));
  const errorsOf = (validate: { errors?: unknown }) => JSON.stringify(validate.errors, null, 1);

  /** Problems with `exchange` (empty when it is described); also the operation it matched. */
  return (exchange: Exchange): { problems: string[]; operation?: string } => {
    const problems: string[] = [];
    const pathname = exchange.url.pathname;
    const method = exchange.method.toLowerCase();
    const match = matchers
      .map((m) => ({ m, groups: m.regex.exec(pathname) }))
      .find(({ m, groups }) => groups && paths[m.template]?.[method]);
    if (!match?.groups) {
      return { problems: [`${exchange.method} ${pathname} is not in the document`] };
    }
    const key = `${exchange.method} ${match.m.template}`;
    const operation = paths[match.m.template]?.[method] as Operation;
    const parameters = operation.parameters ?? [];
    match.m.names.forEach((name, index) => {
      const parameter = parameters.find((p) => p.in === 'path' && p.name === name);
      const value = decodeURIComponent(match.groups?.[index + 1] ?? '');
      const validate = parameter && coercing.compile({ type: 'object', properties: { value: parameter.schema } });
      if (!parameter) {
        problems.push(`${key}: path parameter ${name} is not documented`);
      } else if (validate && !validate({ value }) && exchange.status < 400) {
        problems.push(`${key}: path parameter ${name}=${value} was accepted but fails ${errorsOf(validate)}`);
      }
    });
    for (const [name, value] of exchange.url.searchParams) {
      const parameter = parameters.find((p) => p.in === 'query' && p.name === name);
      if (!parameter) {
        problems.push(`${key}: query parameter ${name} is not documented`);
        continue;
      }
      const validate = coercing.compile({ type: 'object', properties: { value: parameter.schema } });
      if (!validate({ value }) && exchange.status < 400) {
        problems.push(`${key}: query ${name}=${value} was accepted but fails ${errorsOf(validate)}`);
      }
    }
    if (exchange.requestBody !== undefined) {
      const type = (exchange.requestHeaders.get('content-type') ?? '').split(';')[0] ?? '';
      const media = operation.requestBody?.content[type];
      if (!media) {
        problems.push(`${key}: sent a ${type} body the document does not describe`);
      } else if (type === 'application/json' && exchange.status < 400) {
        const validate = ajv.compile(resolve(media.schema));
        if (!validate(exchange.requestBody)) {
          problems.push(`${key}: an accepted request body fails the schema: ${errorsOf(validate)}`);
        }
      }
    }
    const response = operation.responses[String(exchange.status)];
    if (!response) {
      problems.push(`${key}: answered ${exchange.status}, which the document does not list`);
      return { problems, operation: key };
    }
    const documented = Object.keys(response.content ?? {});
    if (documented.length > 0 && !documented.some((type) => exchange.contentType.startsWith(type))) {
      problems.push(`${key} ${exchange.status}: answered ${exchange.contentType}, documented ${documented.join(', ')}`);
    }
    const json = response.content?.['application/json'];
    if (json && exchange.responseBody !== undefined) {
      const validate = ajv.compile(resolve(json.schema));
      if (!validate(exchange.responseBody)) {
        problems.push(
          `${key} ${exchange.status}: the answer fails its schema: ${errorsOf(validate)}\n${JSON.stringify(exchange.responseBody).slice(0, 500)}`,
        );
      }
    }
    return { problems, operation: key };
  };
}
