/**
 * The shape of one entry of the HTTP route table (routes.ts): what the OpenAPI document says
 * about a route — its parameters, body and answers as the zod schemas that validate or describe
 * them, and the error codes it can answer with.
 */
import type { z } from 'zod';
import type { ErrorCode } from '../../domain/errors.ts';

export type Method = 'get' | 'post' | 'put' | 'delete';

/** Who may call: an organization's API key (Bearer), the operator (basic auth), or anyone. */
export type Auth = 'apiKey' | 'operator' | 'none';

export type Tag =
  | 'Tools'
  | 'Operations'
  | 'Scratchpad'
  | 'Notes'
  | 'Context'
  | 'MCP'
  | 'Health'
  | 'Operator'
  | 'Reference';

/** A schema with the name it has under components.schemas. */
export interface Named {
  name: string;
  schema: z.ZodType;
}

/** A body that is not described by a JSON schema. */
export interface OtherBody {
  contentType: string;
  description?: string;
}

export interface ResponseSpec {
  description: string;
  /** JSON bodies: a named schema. */
  json?: Named;
  /** Other bodies (beside JSON, when the answer is negotiated): the media type and what it holds. */
  other?: OtherBody | readonly OtherBody[];
  headers?: Record<string, { description: string; schema: Record<string, unknown> }>;
}

export interface HeaderParam {
  name: string;
  description: string;
  schema: z.ZodType;
}

export interface RouteSpec {
  method: Method;
  /** Express style (`/v1/operations/:operationId`), as the router registers it. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: Tag;
  auth: Auth;
  params?: z.ZodObject;
  query?: z.ZodObject;
  headers?: readonly HeaderParam[];
  body?: Named & { required: boolean; contentType?: 'application/json' | 'application/x-www-form-urlencoded' };
  /** Success answers by status. */
  responses: Record<number, ResponseSpec>;
  /** The error codes this route can answer with (their statuses come from ERROR_CODES). */
  errors: readonly ErrorCode[];
}
