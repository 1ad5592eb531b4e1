import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';
import { columnTypes, dialectOf } from './column-types.js';

const PROCESSES = 'geneva_drive_processes';

/**
 * The process table: each process of the application records itself (host, pid, when it started and
 * was last seen, whether it runs step jobs, and the workflow classes and steps it has) so that
 * housekeeping can report executions no live process can run. A table of its own, with its own
 * string key: independent of the key type (the same class serves both migration sets), and until it
 * runs everything but that report keeps working.
 * @publicApi
 */
export class AddGenevaDriveProcesses1730000000005 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveProcesses1730000000005';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (await queryRunner.hasTable(PROCESSES)) return;
    const t = columnTypes(dialectOf(queryRunner));
    await queryRunner.createTable(
      new Table({
        name: PROCESSES,
        columns: [
          // `<host>:<pid>:<random>`: written by the engine, ASCII in practice.
          { name: 'id', type: 'varchar', length: '255', isPrimary: true },
          { name: 'host', type: 'varchar', length: '255', isNullable: false },
          { name: 'pid', type: 'integer', isNullable: false },
          t.boolean('runs_steps', false),
          t.json('catalog'),
          t.datetime('started_at'),
          t.datetime('seen_at'),
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(PROCESSES, true);
  }
}
