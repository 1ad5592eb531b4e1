import type { MigrationInterface } from 'typeorm';
import type { PrimaryKeyType } from './primary-keys.js';
import { CreateGenevaDriveTables1730000000000 } from './1730000000000-create-geneva-drive-tables.js';
import { AddGenevaDriveSignals1730000000001 } from './1730000000001-add-geneva-drive-signals.js';
import { ExactGenevaDriveIdentifiers1730000000002 } from './1730000000002-exact-geneva-drive-identifiers.js';
import { AddGenevaDriveListIndexes1730000000003 } from './1730000000003-add-geneva-drive-list-indexes.js';
import { AddGenevaDriveWaitDeadlines1730000000004 } from './1730000000004-add-geneva-drive-wait-deadlines.js';
import { AddGenevaDriveProcesses1730000000005 } from './1730000000005-add-geneva-drive-processes.js';
import { AddGenevaDriveChildWorkflows1730000000006 } from './1730000000006-add-geneva-drive-child-workflows.js';
import { AddGenevaDriveFlowControl1730000000007 } from './1730000000007-add-geneva-drive-flow-control.js';
import { AddGenevaDriveFlowKeyIndex1730000000008 } from './1730000000008-add-geneva-drive-flow-key-index.js';
import { AddGenevaDriveRateLimits1730000000009 } from './1730000000009-add-geneva-drive-rate-limits.js';
import { PartialGenevaDriveIndexes1730000000010 } from './1730000000010-partial-geneva-drive-indexes.js';

export {
  AddGenevaDriveChildWorkflows1730000000006,
  AddGenevaDriveFlowControl1730000000007,
  AddGenevaDriveFlowKeyIndex1730000000008,
  AddGenevaDriveListIndexes1730000000003,
  AddGenevaDriveProcesses1730000000005,
  AddGenevaDriveRateLimits1730000000009,
  AddGenevaDriveSignals1730000000001,
  AddGenevaDriveWaitDeadlines1730000000004,
  CreateGenevaDriveTables1730000000000,
  ExactGenevaDriveIdentifiers1730000000002,
  PartialGenevaDriveIndexes1730000000010,
};

/**
 * geneva-drive's migrations, in order, for the application's TypeORM `migrations` list. The class
 * names (and their timestamps) are part of the public contract: TypeORM records them in its
 * migrations table. These create bigint keys; {@link genevaDriveMigrations} chooses the key type.
 * @publicApi
 */
export const GENEVA_DRIVE_MIGRATIONS = [
  CreateGenevaDriveTables1730000000000,
  AddGenevaDriveSignals1730000000001,
  ExactGenevaDriveIdentifiers1730000000002,
  AddGenevaDriveListIndexes1730000000003,
  AddGenevaDriveWaitDeadlines1730000000004,
  AddGenevaDriveProcesses1730000000005,
  AddGenevaDriveChildWorkflows1730000000006,
  AddGenevaDriveFlowControl1730000000007,
  AddGenevaDriveFlowKeyIndex1730000000008,
  AddGenevaDriveRateLimits1730000000009,
  PartialGenevaDriveIndexes1730000000010,
];

/** Options of {@link genevaDriveMigrations}. @publicApi */
export interface GenevaDriveMigrationsOptions {
  /** The key type of the three tables, chosen once, when they are created. @default 'bigint' */
  primaryKey?: PrimaryKeyType;
}

/*
 * The same migrations configured for uuid keys (the exact-identifiers upgrade, the list indexes, the
 * wait deadlines, the process table, the child workflows' columns, flow control, its index, rate limits and the partial indexes do not depend on the key type: the same class serves both sets). TypeORM
 * identifies a migration by its `name` (class name + 13-digit timestamp) — the subclasses inherit
 * the name of their parent, so the migrations table reads the same whichever set ran — and
 * instantiates the classes it is given without arguments, hence subclasses rather than constructor
 * options.
 */
class CreateGenevaDriveTablesWithUuidKeys extends CreateGenevaDriveTables1730000000000 {
  protected override readonly primaryKey: PrimaryKeyType = 'uuid';
}

class AddGenevaDriveSignalsWithUuidKeys extends AddGenevaDriveSignals1730000000001 {
  protected override readonly primaryKey: PrimaryKeyType = 'uuid';
}

/**
 * geneva-drive's migrations for the chosen key type: `genevaDriveMigrations({ primaryKey: 'uuid' })`
 * creates uuid keys (PostgreSQL `uuid`, MySQL/MariaDB `char(36)`, SQLite `varchar(36)`), and
 * `'bigint'` (the default) returns {@link GENEVA_DRIVE_MIGRATIONS}. The classes have the same names
 * either way. Choose before the first run: the engine reads the key type from the tables at boot, and
 * the signals migration refuses tables created with the other type.
 * @publicApi
 */
export function genevaDriveMigrations(options: GenevaDriveMigrationsOptions = {}): Array<new () => MigrationInterface> {
  const primaryKey = options.primaryKey ?? 'bigint';
  switch (primaryKey) {
    case 'bigint':
      return [...GENEVA_DRIVE_MIGRATIONS];
    case 'uuid':
      return [
        CreateGenevaDriveTablesWithUuidKeys,
        AddGenevaDriveSignalsWithUuidKeys,
        ExactGenevaDriveIdentifiers1730000000002,
        AddGenevaDriveListIndexes1730000000003,
        AddGenevaDriveWaitDeadlines1730000000004,
        AddGenevaDriveProcesses1730000000005,
        AddGenevaDriveChildWorkflows1730000000006,
        AddGenevaDriveFlowControl1730000000007,
        AddGenevaDriveFlowKeyIndex1730000000008,
        AddGenevaDriveRateLimits1730000000009,
        PartialGenevaDriveIndexes1730000000010,
      ];
    default:
      throw new TypeError(`genevaDriveMigrations: primaryKey must be 'bigint' or 'uuid', got ${JSON.stringify(primaryKey)}`);
  }
}
