/**
 * The answers of task-augmented calls that make no operation (a `progress` or `get` asked as a
 * task): they are complete when the task is created, so a client only needs to read them once.
 * Kept in memory for {@link ANSWER_TTL_MS}, at most {@link MAX_ANSWERS} per process, per session
 * key; expired ones are dropped when the store is next used (no timers: nothing keeps a process
 * alive, and nothing needs closing).
 */
import { randomUUID } from 'node:crypto';
import type { CallToolResult, Task } from '@modelcontextprotocol/sdk/types.js';

/** How long an answer stays readable through tasks/get and tasks/result. */
export const ANSWER_TTL_MS = 5 * 60_000;
/** The most answers a process keeps; the oldest go first. */
export const MAX_ANSWERS = 10_000;

interface Kept {
  sessionKey: string;
  task: Task;
  result: CallToolResult;
  expires: number;
}

export class TaskAnswers {
  private readonly kept = new Map<string, Kept>();

  /** Keeps `result` as a finished task of `sessionKey`, and returns the task. */
  add(sessionKey: string, result: CallToolResult, pollInterval: number): Task {
    this.prune();
    const now = new Date();
    const task: Task = {
      taskId: `answer-${randomUUID()}`,
      status: result.isError ? 'failed' : 'completed',
      ttl: ANSWER_TTL_MS,
      createdAt: now.toISOString(),
      lastUpdatedAt: now.toISOString(),
      pollInterval,
    };
    this.kept.set(task.taskId, { sessionKey, task, result, expires: now.getTime() + ANSWER_TTL_MS });
    while (this.kept.size > MAX_ANSWERS) {
      const oldest = this.kept.keys().next().value;
      if (oldest === undefined) {
        break;
      }
      this.kept.delete(oldest);
    }
    return { ...task };
  }

  get(sessionKey: string, taskId: string): { task: Task; result: CallToolResult } | null {
    const kept = this.kept.get(taskId);
    if (!kept || kept.sessionKey !== sessionKey || kept.expires <= Date.now()) {
      return null;
    }
    return { task: { ...kept.task }, result: kept.result };
  }

  list(sessionKey: string): Task[] {
    this.prune();
    return [...this.kept.values()].filter((kept) => kept.sessionKey === sessionKey).map((kept) => ({ ...kept.task }));
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, kept] of this.kept) {
      // Insertion order is expiry order: stop at the first one still alive.
      if (kept.expires > now) {
        break;
      }
      this.kept.delete(id);
    }
  }
}
