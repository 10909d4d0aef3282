/**
 * The embedded PGlite database can be open in one process only. While `opspad start` holds it,
 * other `opspad` commands on the same machine reach it through a Unix socket in the data folder
 * (`<OPSPAD_DATA_DIR>/control.sock`), so `opspad keys create` works beside a running service.
 * Access is the file system's: whoever may read the data folder may already read the database.
 */
import { existsSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { join } from 'node:path';
import { z } from 'zod';
import { type CreatedApiKey, createApiKey, type Database } from '../store/index.ts';

export function controlSocketPath(dataDir: string): string {
  return join(dataDir, 'control.sock');
}

const KeyRequest = z.strictObject({ org: z.string().min(1).max(200) });

/**
 * Throws when a live opspad process holds the embedded database in `dataDir`; removes a socket
 * left behind by one that died. Call before opening PGlite.
 */
export async function ensureEmbeddedDatabaseFree(dataDir: string): Promise<void> {
  const path = controlSocketPath(dataDir);
  if (!existsSync(path)) {
    return;
  }
  if (await isLive(path)) {
    throw new Error(
      `Another opspad process is using the embedded database in ${dataDir}. Stop it first, or set DATABASE_URL to share a Postgres server between processes.`,
    );
  }
  rmSync(path, { force: true });
}

/** Serves key creation on the control socket while this process holds the embedded database. */
export async function listenLocalControl(dataDir: string, db: Database): Promise<Server> {
  const path = controlSocketPath(dataDir);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) {
      chunks.push(chunk as Buffer);
    }
    try {
      if (req.method !== 'POST' || req.url !== '/keys') {
        res.writeHead(404).end();
        return;
      }
      const body = KeyRequest.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      const created = await createApiKey(db, body.org);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(created));
    } catch (error) {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(error) }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  return server;
}

function isLive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath: path, method: 'GET', path: '/ping', timeout: 1000 }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}

/** Creates a key through a running service, or returns null when none is listening. */
export async function createKeyViaLocalControl(dataDir: string, org: string): Promise<CreatedApiKey | null> {
  const path = controlSocketPath(dataDir);
  if (!existsSync(path) || !(await isLive(path))) {
    return null;
  }
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: path, method: 'POST', path: '/keys' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 200) {
          resolve(JSON.parse(text) as CreatedApiKey);
        } else {
          reject(new Error(`the running opspad refused: ${text}`));
        }
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify({ org }));
  });
}
