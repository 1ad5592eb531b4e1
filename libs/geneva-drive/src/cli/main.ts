#!/usr/bin/env node
/**
 * `geneva-drive --data-source dist/data-source.js <command> [--json]`: the dashboard's operations
 * from a shell. The file exports a TypeORM DataSource (the typeorm CLI's convention) and, as
 * `genevaDrive`, the workflow classes and the application's queue (see GenevaDriveCliConfig).
 */
import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { NestFactory } from '@nestjs/core';
import { UnknownWorkflowError } from '../errors/unknown-workflow.error.js';
import { statusOf } from '../operator/workflow-actions.js';
import { loadDataSourceFile } from './cli-config.js';
import { connect } from './cli-connect.js';
import { COMMANDS, LIST_OPTION_NAMES, runCommand, type CliInvocation } from './cli.commands.js';
import { GenevaDriveCliModule } from './cli.module.js';
import { CliUsageError } from './cli-usage.error.js';
import { terminalSafe } from './terminal-text.js';

/** Exit codes: documented in the manual (9.3). */
export const EXIT = { ok: 0, failed: 1, usage: 2, notFound: 3, conflict: 4, tooLarge: 5 } as const;

const USAGE = `usage: geneva-drive --data-source <file.js> <command> [--json]
commands:
  list [--type T] [--state S] [--hero-type T] [--hero-id ID] [--waiting-for SIGNAL] [--failed-step STEP]
       [--created-from DATE] [--created-to DATE] [--updated-from DATE] [--updated-to DATE] [--search ID] [--after ID] [--limit N]
  show ID [--executions-after ID] [--signals-after ID] [--children-after ID] [--limit N]
  signal ID NAME [--payload JSON | --payload @file.json] [--key KEY]
  pause ID | resume ID | skip ID | cancel ID
  resume-at ID STEP
  check
  housekeeping
  gauges
  flow-keys [--limit N]`;

function parse(argv: string[]): CliInvocation & { dataSource: string; json: boolean } {
  const listOptions = Object.fromEntries(LIST_OPTION_NAMES.map((name) => [name, { type: 'string' as const }]));
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        'data-source': { type: 'string', short: 'd' },
        json: { type: 'boolean' },
        payload: { type: 'string' },
        key: { type: 'string' },
        limit: { type: 'string' },
        'executions-after': { type: 'string' },
        'signals-after': { type: 'string' },
        'children-after': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        ...listOptions,
      },
    });
  } catch (error) {
    throw new CliUsageError(`${(error as Error).message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  if (values.help) throw new CliUsageError(USAGE);
  const [command, ...args] = positionals;
  if (!command || !(COMMANDS as readonly string[]).includes(command)) throw new CliUsageError(`${command ? `Unknown command ${JSON.stringify(command)}` : 'No command given'}\n${USAGE}`);
  const dataSource = values['data-source'];
  if (!dataSource) throw new CliUsageError(`--data-source <file> is required: a module exporting your TypeORM DataSource\n${USAGE}`);
  return { command, args, options: values as Record<string, string | boolean | undefined>, dataSource, json: values.json === true };
}

function exitCodeOf(error: unknown): number {
  if (error instanceof CliUsageError) return EXIT.usage;
  switch (statusOf(error)) {
    case 400:
      return EXIT.usage;
    case 404:
      return EXIT.notFound;
    case 409:
      return EXIT.conflict;
    case 413:
      return EXIT.tooLarge;
    default:
      return error instanceof UnknownWorkflowError ? EXIT.usage : EXIT.failed;
  }
}

function messageOf(error: unknown): string {
  const err = error as Error;
  const hint = error instanceof UnknownWorkflowError ? ' (the CLI needs the class: list it in the genevaDrive.providers export of the data source file)' : '';
  const text = error instanceof CliUsageError ? err.message : `${err.name}: ${err.message}${hint}`;
  return text.split('\n').map(terminalSafe).join('\n'); // a stored value in a message must not drive the terminal
}

export async function main(argv: string[]): Promise<number> {
  let json = argv.includes('--json');
  try {
    const invocation = parse(argv);
    json = invocation.json;
    const { dataSource, config } = await loadDataSourceFile(invocation.dataSource);
    await connect(dataSource);
    const app = await NestFactory.createApplicationContext(GenevaDriveCliModule.register(dataSource, config), { logger: json ? false : ['error'], abortOnError: false });
    try {
      const result = await runCommand(app, invocation);
      process.stdout.write(`${json ? JSON.stringify(result.json, null, 2) : result.text}\n`);
      return result.exitCode ?? EXIT.ok;
    } finally {
      await app.close();
    }
  } catch (error) {
    const code = exitCodeOf(error);
    if (json) process.stderr.write(`${JSON.stringify({ error: (error as Error).name, message: (error as Error).message, exitCode: code })}\n`);
    else process.stderr.write(`geneva-drive: ${messageOf(error)}\n`);
    return code;
  }
}

process.exitCode = await main(process.argv.slice(2));
