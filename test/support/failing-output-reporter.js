/**
 * A Jest reporter for quiet runs: prints the console output of a test file only when one of its tests
 * failed (the summary reporter prints the failures themselves). Passing files print nothing.
 */
const path = require('node:path');

class FailingOutputReporter {
  onTestResult(_test, result) {
    if (!(result.numFailingTests > 0 || result.testExecError) || !result.console?.length) return;
    const file = path.relative(process.cwd(), result.testFilePath);
    process.stderr.write(`\nConsole output of ${file} (it has failing tests):\n`);
    for (const entry of result.console) process.stderr.write(`  console.${entry.type}: ${entry.message}\n`);
  }
}

module.exports = FailingOutputReporter;
