/**
 * `/healthz`: the process is up. `/readyz`: every dependency answers, and the process is not
 * shutting down; load balancers stop sending traffic as soon as it turns 503.
 */
import { Router } from 'express';

export type ReadinessCheck = () => Promise<void>;

export interface Readiness {
  checks: Record<string, ReadinessCheck>;
  /** False once shutdown has begun. */
  accepting(): boolean;
}

const CHECK_TIMEOUT_MS = 2000;

async function runCheck(check: ReadinessCheck): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return 'ok';
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    clearTimeout(timer);
  }
}

export function healthRouter(readiness: Readiness): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const names = Object.keys(readiness.checks);
    const results = await Promise.all(names.map((name) => runCheck(readiness.checks[name] as ReadinessCheck)));
    const checks = Object.fromEntries(names.map((name, i) => [name, results[i]]));
    const ready = readiness.accepting() && results.every((r) => r === 'ok');
    res
      .status(ready ? 200 : 503)
      .json({ status: ready ? 'ready' : 'not_ready', shutting_down: !readiness.accepting(), checks });
  });
  return router;
}
