import type { MigrationInterface, QueryRunner } from 'typeorm';
import { dialectOf } from './column-types.js';
import { indexCondition } from './partial-indexes.js';

const EXECUTIONS = 'geneva_drive_step_executions';
/**
 * The executions waiting for a slot of a key (`scheduled`) or holding one (`in_progress`), read by
 * the gauges, the dashboard and the CLI: a range of each state. State first: every finished
 * execution of a keyed step keeps its `flow_key`, so `(flow_key, state)` would read the history too.
 */
const FLOW_KEY_INDEX = 'geneva_drive_step_executions_state_flow_key';

/**
 * An index on `(state, flow_key)` of `geneva_drive_step_executions`, for the reads that show
 * concurrency keys to operators. Adds no column and changes no row. Needs the flow-control migration
 * (its `flow_key` column) before it. Raw SQL on every database, as in the list indexes' migration.
 * The same class serves both key types.
 * @publicApi
 */
export class AddGenevaDriveFlowKeyIndex1730000000008 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveFlowKeyIndex1730000000008';

  async up(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    await queryRunner.query(`CREATE INDEX ${q(FLOW_KEY_INDEX)} ON ${q(EXECUTIONS)} (${q('state')}, ${q('flow_key')})${indexCondition(queryRunner, FLOW_KEY_INDEX)}`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    const on = dialectOf(queryRunner) === 'mysql' ? ` ON ${q(EXECUTIONS)}` : '';
    await queryRunner.query(`DROP INDEX ${q(FLOW_KEY_INDEX)}${on}`);
  }
}
