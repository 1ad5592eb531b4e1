/**
 * The process DBOS Transact runs its side of the comparison in (dbos-child.ts forks it). DBOS keeps
 * an AsyncLocalStorage enabled once it has run, which puts a hook on every promise of the process
 * that loaded it: in the bench's own process it would charge geneva-drive's later runs with DBOS's
 * instrumentation. Here each engine pays only for its own.
 *
 * From the parent: { id, command: 'run', sizes } (one measured run, DBOS launched for it) and
 * { id, command: 'close' }. To the parent: { type: 'ready' }, { type: 'reply', id, result | error }.
 * Environment: GD_BENCH_DATABASE as the parent's, GD_BENCH_PROFILE (the parent's --profile).
 */
import { DbosPeer } from './dbos-peer.js';
import { profileInto } from './profile.js';
import { measurePeerRun, type PeerRun } from './shape.js';
import type { Sizes } from './config.js';
import type { ForkedMessage } from './forked-process.js';

export type DbosRequest = { id: number; command: 'run'; sizes: Pick<Sizes, 'shapeWorkflows' | 'sequentialSignals'> } | { id: number; command: 'close' };
/** A run's figures and everything DBOS has logged since the process began (an error fails the bench, as the engine's do). */
export interface DbosRunReply {
  run: PeerRun;
  errors: string[];
  warnings: number;
}

function send(message: ForkedMessage): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  profileInto(process.env.GD_BENCH_PROFILE || undefined);
  const peer = await DbosPeer.open();
  const handle = async (request: DbosRequest): Promise<DbosRunReply | undefined> => {
    if (request.command === 'close') {
      await peer.close();
      return undefined;
    }
    const run = await peer.whileLaunched(() => measurePeerRun(peer.engine, request.sizes));
    return { run, errors: peer.logger.errors.map(String), warnings: peer.logger.warnings.length };
  };
  process.on('message', (request: DbosRequest) => {
    void handle(request).then(
      (result) => {
        send({ type: 'reply', id: request.id, result });
        if (request.command === 'close') process.disconnect();
      },
      (error: unknown) => send({ type: 'reply', id: request.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
    );
  });
  // The bench that forked this process is gone: nothing would ever stop it.
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
