/**
 * opspad's HTTP API without workers, in a process of its own (`createOpspad({ workers: false })`,
 * the embedding API): the API of the many-operations scenario, whose work is done by worker
 * processes of their own. Settings come from the environment, as `opspad start` reads them.
 */
import { createOpspad } from '../../../src/index.ts';
import { serve } from '../../lib/forked-child.ts';

const opspad = await createOpspad({ workers: false });

serve({ url: () => opspad.url }, () => opspad.close());
