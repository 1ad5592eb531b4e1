/**
 * Jest's Node environment, plus a check when a test file ends: whatever the file opened and left
 * keeping the process alive (a socket, a server, a child process, a timer) fails the file. Left
 * open, it would hold the jest worker past its exit grace period ("A worker process has failed to
 * exit gracefully"), and a later test file in the same worker would inherit it.
 *
 * The resources alive when the file starts are its baseline; those above it may take a moment to
 * close after the last afterAll (a socket's close event), so they get the grace period jest gives a
 * worker before it kills it. `npm test -- --runInBand --detectOpenHandles <file>` shows where a
 * reported resource was created.
 */
const { TestEnvironment } = require('jest-environment-node');

/** As long as jest waits for a worker to exit on its own (jest-worker's default). */
const GRACE_MS = 500;

/** Handles (sockets, servers, child processes) that keep the event loop alive. */
function refHandles() {
  return process._getActiveHandles().filter((handle) => handle?._handle?.hasRef?.() !== false);
}

/** Timers that keep the event loop alive (they are not among the handles). */
function refTimers() {
  return process.getActiveResourcesInfo().filter((type) => type === 'Timeout').length;
}

function describeHandle(handle) {
  const name = handle?.constructor?.name ?? typeof handle;
  if (name === 'Socket' && handle.remotePort !== undefined) return `a socket to ${handle.remoteAddress}:${handle.remotePort}`;
  if (name === 'Server' && typeof handle.address === 'function' && handle.address()) return `a server on port ${handle.address().port}`;
  if (name === 'ChildProcess') return `child process ${handle.pid} (${handle.spawnargs.join(' ')})`;
  return `a ${name}`;
}

/** What is open now and was not in the baseline. */
function left(baseline) {
  const handles = refHandles().filter((handle) => !baseline.handles.has(handle)).map(describeHandle);
  const timers = refTimers() - baseline.timers;
  return timers > 0 ? [...handles, `${timers} timer(s)`] : handles;
}

class OpenHandlesEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
  }

  async setup() {
    await super.setup();
    this.baseline = { handles: new Set(refHandles()), timers: refTimers() };
  }

  async teardown() {
    await super.teardown();
    const deadline = Date.now() + GRACE_MS;
    let open = left(this.baseline);
    while (open.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      open = left(this.baseline);
    }
    if (open.length === 0) return;
    throw new Error(
      `${this.testPath} left ${open.join(', ')} open ${GRACE_MS} ms after it ended: ` +
        'close it in the test (afterAll/afterEach) or in the code that opened it',
    );
  }
}

module.exports = OpenHandlesEnvironment;
