/**
 * The MCP Task store of opspad's MCP server. A task made by `create` is the operation itself:
 * its id is the operation id, and every read goes to opspad (the operation's row in Postgres),
 * so a task survives a restart of the MCP server and of opspad, and every MCP process of the
 * organization sees it. Nothing is written for such a task: its status and result are the
 * operation's (operation-task.ts), and cancelling it cancels the operation.
 *
 * Any other call of the operation tool made as a task (clients that know a tool supports tasks
 * may ask for one on every call) answers at once; its task id carries its answer
 * (task-answers.ts), so it too is read back by any process, after any restart.
 *
 * `tasks/list` pages through the session's home conversation's operations, finished ones
 * included (`GET /v1/conversations/:id/operations`, keyset-paged: the cursor is opspad's).
 *
 * A task id of another organization answers like an unknown one: opspad answers 404 for it.
 */
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { CallToolResult, Task } from '@modelcontextprotocol/sdk/types.js';
import type { OpspadHttpClient } from './http-client.ts';
import { sessionProblem } from './http-client.ts';
import {
  type OperationTaskSource,
  operationTask,
  operationTaskResult,
  operationTaskSource,
  TASK_POLL_INTERVAL_MS,
} from './operation-task.ts';
import { type ConversationRouter, OPERATION_TOOL } from './session.ts';
import { answerOf, answerTask } from './task-answers.ts';

/** Tasks per `tasks/list` page. */
export const TASKS_PAGE = 50;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface OperationTaskStoreOptions {
  client: OpspadHttpClient;
  router: ConversationRouter;
}

export interface OperationTaskStore extends TaskStore {
  /** The task of operation `operationId`, as `tasks/get` answers it (null: not found). */
  operationTask(operationId: string, signal?: AbortSignal): Promise<Task | null>;
  /** The finished task of a call that made no operation: its id carries the answer. */
  answerTask(result: CallToolResult): Task;
}

export function createOperationTaskStore(options: OperationTaskStoreOptions): OperationTaskStore {
  const { client, router } = options;

  /** The operation's `get` answer within the organization, or null. */
  async function source(taskId: string, signal?: AbortSignal): Promise<OperationTaskSource | null> {
    if (!UUID.test(taskId)) {
      return null;
    }
    const where = await client.operation(taskId, signal);
    if (!where) {
      return null;
    }
    const answer = await client.callTool(
      where.conversation_id,
      OPERATION_TOOL,
      { action: 'get', operation_id: taskId, failures_limit: 1 },
      signal,
    );
    const problem = sessionProblem(client.baseUrl, answer, 'tasks');
    if (problem) {
      throw problem;
    }
    return answer.ok ? operationTaskSource(answer.body) : null;
  }

  const answered = (taskId: string) => answerOf(taskId, TASK_POLL_INTERVAL_MS);

  return {
    async operationTask(operationId, signal) {
      const found = await source(operationId, signal);
      return found ? operationTask(found) : null;
    },

    answerTask(result) {
      return answerTask(result, TASK_POLL_INTERVAL_MS);
    },

    async createTask() {
      // Tasks are made by the operation tool (server.ts), never by the SDK's task helpers.
      throw new Error('opspad makes its tasks itself: call manage_assistant_operation as a task.');
    },

    async getTask(taskId) {
      const answer = answered(taskId);
      if (answer) {
        return answer.task;
      }
      const found = await source(taskId);
      return found ? operationTask(found) : null;
    },

    async storeTaskResult() {
      // An operation's result is the operation, and an answer is kept finished: nothing to store.
    },

    async getTaskResult(taskId) {
      const answer = answered(taskId);
      if (answer) {
        return answer.result;
      }
      const found = await source(taskId);
      if (!found) {
        throw new Error(`Task ${taskId} was not found.`);
      }
      return operationTaskResult(found);
    },

    async updateTaskStatus(taskId, status) {
      // Only a cancel changes an operation from here; its other states are read from it. (An
      // answer is finished: the SDK refuses to change it before asking.)
      if (status !== 'cancelled' || answered(taskId)) {
        return;
      }
      const where = UUID.test(taskId) ? await client.operation(taskId) : null;
      if (!where) {
        throw new Error(`Task ${taskId} was not found.`);
      }
      const answer = await client.callTool(where.conversation_id, OPERATION_TOOL, {
        action: 'cancel',
        operation_id: taskId,
      });
      if (!answer.ok) {
        throw new Error(`Cancelling operation ${taskId} failed: ${JSON.stringify(answer.body)}`);
      }
    },

    async listTasks(cursor) {
      // The home conversation's operations, finished ones included, newest first, a page at a
      // time (the cursor is opspad's keyset); the first page also names the operation this
      // session last made or named elsewhere (a create sent to a fresh conversation).
      const page = await client.operations(router.home, { before: cursor, limit: TASKS_PAGE });
      const tasks = page.operations.map(operationTask);
      const last = cursor ? null : router.memory().lastOperation;
      if (last && !page.operations.some((op) => op.operation_id === last)) {
        const where = await client.operation(last);
        const found = where && where.conversation_id !== router.home ? await source(last) : null;
        if (found) {
          tasks.unshift(operationTask(found));
        }
      }
      return { tasks, ...(page.next_before ? { nextCursor: page.next_before } : {}) };
    },
  };
}
