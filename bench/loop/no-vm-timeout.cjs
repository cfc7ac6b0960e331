/**
 * Experiment (BENCH_NO_VM_TIMEOUT=1), not product code: drops the `timeout` option from node:vm calls
 * in every thread of the bench worker. Temporal's TS SDK passes its isolate execution timeout (5 s) to
 * each `runInContext` call into the workflow sandbox, and Node implements a vm timeout by starting a
 * watchdog thread per call: ~0.35 ms per call on this machine against ~5 µs without (several calls per
 * activation). Without it, a workflow stuck in an infinite loop would hang its workflow thread instead
 * of failing the workflow task after 5 s.
 */
// A `--require` preload runs before any loader, so it is CommonJS.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const vm = require('node:vm');

function withoutTimeout(options) {
  if (!options || typeof options !== 'object' || options.timeout === undefined) return options;
  const rest = { ...options };
  delete rest.timeout;
  return rest;
}

const scriptRunInContext = vm.Script.prototype.runInContext;
vm.Script.prototype.runInContext = function runInContext(context, options) {
  return scriptRunInContext.call(this, context, withoutTimeout(options));
};
const moduleRunInContext = vm.runInContext;
vm.runInContext = function runInContextWithoutTimeout(code, context, options) {
  return moduleRunInContext.call(this, code, context, withoutTimeout(options));
};
