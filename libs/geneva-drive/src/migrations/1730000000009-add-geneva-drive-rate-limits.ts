import type { MigrationInterface, QueryRunner } from 'typeorm';
import { dialectOf } from './column-types.js';

const FLOW_KEYS = 'geneva_drive_flow_keys';
const RATE_WINDOW = 'rate_window';

/**
 * Rate limits: `rate_window` on `geneva_drive_flow_keys` (needs the flow-control migration), the
 * recent starts of executions holding the key and the times promised to those scheduled for a later
 * window, as JSON the engine writes. Nullable, no default: a plain ALTER TABLE everywhere, and a
 * key's row written before it simply has no window yet. Until it runs, everything but steps with a
 * `rateLimit` keeps working. The same class serves both migration sets.
 * @publicApi
 */
export class AddGenevaDriveRateLimits1730000000009 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveRateLimits1730000000009';

  async up(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    if (await queryRunner.hasColumn(FLOW_KEYS, RATE_WINDOW)) return;
    // longtext on MySQL, whose text holds 64 KB only: a window of a large limit must still fit.
    const type = dialectOf(queryRunner) === 'mysql' ? 'longtext' : 'text';
    await queryRunner.query(`ALTER TABLE ${q(FLOW_KEYS)} ADD COLUMN ${q(RATE_WINDOW)} ${type} NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    if (await queryRunner.hasColumn(FLOW_KEYS, RATE_WINDOW)) await queryRunner.query(`ALTER TABLE ${q(FLOW_KEYS)} DROP COLUMN ${q(RATE_WINDOW)}`);
  }
}
