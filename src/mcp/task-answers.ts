/**
 * The task of a call that made no operation (a `progress`, `get` or `update` asked as a task —
 * the SDK's `callToolStream` asks for one on every call of a tool that supports tasks). Its
 * answer is complete when the task is made, so the task id carries it: the result, deflated and
 * base64url-encoded. Nothing is kept anywhere, so the task and its result are read back by any
 * process that is asked — `opspad mcp` after a restart, any API process behind `/mcp` — for as
 * long as the client holds the id; and whoever holds the id already holds the answer, so no
 * session learns another's through it.
 *
 * An answer too large for an id ({@link MAX_ANSWER_ID_CHARS}) becomes an error result saying to
 * make that call without a task. An id is decoded only within the same bounds, and what it
 * decodes to must be a tool result.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { type CallToolResult, CallToolResultSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const PREFIX = 'answer.';
/** The longest task id made or read: well within a request of `/mcp` or a stdio line. */
export const MAX_ANSWER_ID_CHARS = 256 * 1024;
/** The most an id may inflate to. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

const Carried = z.object({ at: z.iso.datetime(), result: CallToolResultSchema });

function encode(at: string, result: CallToolResult): string {
  return PREFIX + deflateRawSync(JSON.stringify({ at, result })).toString('base64url');
}

function taskOf(taskId: string, at: string, result: CallToolResult, pollInterval: number): Task {
  return {
    taskId,
    status: result.isError ? 'failed' : 'completed',
    // The answer lives as long as its id: nothing to expire.
    ttl: null,
    createdAt: at,
    lastUpdatedAt: at,
    pollInterval,
  };
}

/** The finished task carrying `result`. */
export function answerTask(result: CallToolResult, pollInterval: number): Task {
  const at = new Date().toISOString();
  let taskId = encode(at, result);
  if (taskId.length > MAX_ANSWER_ID_CHARS) {
    const tooLarge: CallToolResult = {
      content: [
        {
          type: 'text',
          text: `This answer is too large to return as a task (${taskId.length} characters encoded, at most ${MAX_ANSWER_ID_CHARS}). Make the same call without a task, or with a smaller batch_size.`,
        },
      ],
      isError: true,
    };
    taskId = encode(at, tooLarge);
    return taskOf(taskId, at, tooLarge, pollInterval);
  }
  return taskOf(taskId, at, result, pollInterval);
}

/** The task and result an answer's id carries; null when `taskId` is not one. */
export function answerOf(taskId: string, pollInterval: number): { task: Task; result: CallToolResult } | null {
  if (!taskId.startsWith(PREFIX) || taskId.length > MAX_ANSWER_ID_CHARS) {
    return null;
  }
  try {
    const json = inflateRawSync(Buffer.from(taskId.slice(PREFIX.length), 'base64url'), {
      maxOutputLength: MAX_ANSWER_BYTES,
    });
    const carried = Carried.safeParse(JSON.parse(json.toString('utf8')));
    if (!carried.success) {
      return null;
    }
    const { at, result } = carried.data;
    return { task: taskOf(taskId, at, result, pollInterval), result };
  } catch {
    return null;
  }
}
