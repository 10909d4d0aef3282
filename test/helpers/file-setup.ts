/** Setup file of the integration and fault suites: the test file's own database and prefix. */
import { afterAll } from 'vitest';
import { openFileResources } from './file-database.ts';

const close = await openFileResources();
afterAll(close);
