/**
 * The demo handler's no-op path under provider limits per organization set far above what a
 * worker can reach (1,000,000 items/s, 100,000 in flight): every batch asks its key for its
 * items and gives them back, and nothing ever waits. opspad_background_b1000_limited against
 * opspad_background_b1000 is what that costs. Loaded by the worker processes through
 * OPSPAD_HANDLERS (from the build, as they run it) and by the bench's dispatcher.
 */
import { createDemoHandler } from '../../dist/handlers/demo.js';

export const LIMITED_DEMO_TYPE = 'demo_limited';

const demo = createDemoHandler();

export default {
  ...demo,
  type: LIMITED_DEMO_TYPE,
  limits: { rate: { max: 1_000_000, durationMs: 1000 }, concurrency: 100_000 },
};
