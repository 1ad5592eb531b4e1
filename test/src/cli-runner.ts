/**
 * The `geneva-drive` command as a child process, for the CLI specs: `compileCli` compiles the CLI and
 * the spec's data source file (test/src/cli-data-source.ts) into a directory of the jest worker's own,
 * and `run` starts `geneva-drive --data-source <that file>` on one test database.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { compileChildEntry, ROOT } from './child-process.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';

/** What one command did: its exit code and its output. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CompiledCli {
  /** The compiled CLI entry. */
  main: string;
  /** The compiled data source file (its directory holds the compiled workflows, too). */
  dataSourceFile: string;
  /** Runs the command on the worker's database of `kind`, with `env` added (GD_CLI_NO_CLASSES, GD_CLI_BULL_QUEUE, …). */
  run(kind: DatabaseKind, args: string[], env?: Record<string, string>, file?: string): Promise<CliRun>;
}

/** Compiles the CLI under .tmp/<label>-<prefix>-<worker>: call it in a beforeAll with a long timeout. */
export async function compileCli(label: string): Promise<CompiledCli> {
  const outDir = path.join(ROOT, '.tmp', `${label}-${process.env.GD_TEST_DB_PREFIX ?? 'gd_test'}-${process.env.JEST_WORKER_ID ?? '0'}`);
  const main = await compileChildEntry('test/tsconfig.cli.json', outDir, 'libs/geneva-drive/src/cli/main.js');
  const dataSourceFile = path.join(outDir, 'test/src/cli-data-source.js');
  const run = (kind: DatabaseKind, args: string[], env: Record<string, string> = {}, file = dataSourceFile) =>
    new Promise<CliRun>((resolve) => {
      // Compiled under .tmp/, databases.ts would place the SQLite file elsewhere: the file is passed on.
      const sqliteFile = kind === 'sqlite' ? String(dataSourceOptions('sqlite').database) : '';
      execFile(process.execPath, [main, '--data-source', file, ...args], { env: { ...process.env, GD_CLI_DB: kind, GD_CLI_SQLITE_FILE: sqliteFile, ...env }, cwd: ROOT, maxBuffer: 10_000_000 }, (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
  return { main, dataSourceFile, run };
}
