/**
 * Jest reporter that ends the run with one machine-readable line: `N passed, N failed` and, when any
 * test was skipped or left as a todo, `, N skipped`.
 * A test file that failed outside its tests (syntax error, failing import, a throwing beforeAll or
 * afterAll) without any failing test counts as one failure, so a broken run never reads "0 failed".
 */
class SummaryReporter {
  onRunComplete(_testContexts, results) {
    const brokenFiles = results.testResults.filter((file) => file.testExecError && file.numFailingTests === 0).length;
    const failed = results.numFailedTests + brokenFiles;
    const skipped = results.numPendingTests + results.numTodoTests;
    let line = `${results.numPassedTests} passed, ${failed} failed`;
    if (skipped > 0) line += `, ${skipped} skipped`;
    process.stdout.write(`\n${line}\n`);
  }
}

module.exports = SummaryReporter;
