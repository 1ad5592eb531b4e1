/**
 * geneva-drive's migrations as the first release shipped them (before identity strings compared
 * exactly on MySQL/MariaDB), kept verbatim to build the schema that existing installs have, so the
 * upgrade migrations can be tested from it with data in it. The uuid set is configured as the
 * release's `genevaDriveMigrations({ primaryKey: 'uuid' })` did it. Never edit these files.
 */
import type { MigrationInterface } from 'typeorm';
import type { PrimaryKeyType } from '../../../libs/geneva-drive/src/migrations/primary-keys.js';
import { CreateGenevaDriveTables1730000000000 } from './1730000000000-create-geneva-drive-tables.js';
import { AddGenevaDriveSignals1730000000001 } from './1730000000001-add-geneva-drive-signals.js';

class CreateGenevaDriveTablesWithUuidKeys extends CreateGenevaDriveTables1730000000000 {
  protected override readonly primaryKey: PrimaryKeyType = 'uuid';
}

class AddGenevaDriveSignalsWithUuidKeys extends AddGenevaDriveSignals1730000000001 {
  protected override readonly primaryKey: PrimaryKeyType = 'uuid';
}

/** The first release's migrations for `primaryKey`, without the signals migration when `withoutSignals`. */
export function releasedMigrations(primaryKey: PrimaryKeyType, options: { withoutSignals?: boolean } = {}): Array<new () => MigrationInterface> {
  const [create, signals] =
    primaryKey === 'uuid'
      ? [CreateGenevaDriveTablesWithUuidKeys, AddGenevaDriveSignalsWithUuidKeys]
      : [CreateGenevaDriveTables1730000000000, AddGenevaDriveSignals1730000000001];
  return options.withoutSignals ? [create] : [create, signals];
}
