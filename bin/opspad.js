#!/usr/bin/env node
// Runs the compiled CLI in dist/ (`npm run build`; an installed package ships it built, and a
// clone builds on `npm install`).
let cli;
try {
  cli = await import('../dist/cli/main.js');
} catch (error) {
  const missing =
    error?.code === 'ERR_MODULE_NOT_FOUND' &&
    String(error.message).includes(new URL('../dist/', import.meta.url).pathname);
  if (!missing) {
    throw error;
  }
  process.stderr.write('opspad: dist/ is not built. Run `npm run build` (or `npm install`) in the opspad checkout.\n');
  process.exit(1);
}
const code = await cli.main(process.argv.slice(2));
if (code >= 0) {
  process.exitCode = code;
}
