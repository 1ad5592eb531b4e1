/**
 * Jest's order of the test files, with the long ones first. Jest starts the files it has timed
 * before longest first, but a fresh checkout has no timings: it then goes by file size, and the
 * schedule explorer's spec, a small file that runs for minutes, would start last and run alone
 * while the other worker idles. The seconds below were measured on a clean checkout's `npm test`
 * (two workers); a file not listed keeps Jest's own order, after these.
 */
const Sequencer = require('@jest/test-sequencer').default;

const MEASURED_SECONDS = {
  'test/proofs/interleavings.e2e-spec.ts': 350,
  'test/e2e/cli.e2e-spec.ts': 230,
  'test/package/consumer.e2e-spec.ts': 98,
  'test/e2e/resumable-crash.e2e-spec.ts': 86,
  'test/proofs/redis-restart.e2e-spec.ts': 69,
  'test/e2e/multi-process.e2e-spec.ts': 57,
  'test/e2e/signals-race.e2e-spec.ts': 55,
  'test/e2e/mixed-fleet.e2e-spec.ts': 54,
  'test/e2e/deploy-check.e2e-spec.ts': 53,
  'test/proofs/rate-limits.e2e-spec.ts': 46,
  'test/proofs/sigkill-chaos.e2e-spec.ts': 44,
  'test/proofs/flow-control.e2e-spec.ts': 43,
  'test/proofs/deadline-race.e2e-spec.ts': 42,
  'test/e2e/dead-worker-takeover.e2e-spec.ts': 39,
  'test/proofs/transactional-effects.e2e-spec.ts': 38,
};

class SlowSuitesFirst extends Sequencer {
  sort(tests) {
    const seconds = (test) => MEASURED_SECONDS[test.path.slice(test.context.config.rootDir.length + 1).split('\\').join('/')] ?? 0;
    const ordered = super.sort(tests);
    const position = new Map(ordered.map((test, index) => [test, index]));
    return [...ordered].sort((a, b) => seconds(b) - seconds(a) || position.get(a) - position.get(b));
  }
}

module.exports = SlowSuitesFirst;
