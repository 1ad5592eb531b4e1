/**
 * Jest reporter that ends the run with one machine-readable line: `N passed, N failed` and, when any
 * test was skipped or left as a todo, `, N skipped`.
 * A test file that could not run at all (syntax error, failing import, throw at collection) reports no
 * test results, so it counts as one failure here: the line must never read "0 failed" for a broken run.
 */
class SummaryReporter {
  onRunComplete(_testContexts, results) {
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    const skipped = results.numPendingTests + results.numTodoTests;
    let line = `${results.numPassedTests} passed, ${failed} failed`;
    if (skipped > 0) line += `, ${skipped} skipped`;
    process.stdout.write(`\n${line}\n`);
  }
}

module.exports = SummaryReporter;
