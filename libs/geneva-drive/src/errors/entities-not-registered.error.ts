import { GenevaDriveError } from './geneva-drive.error.js';

/** geneva-drive's entities are not entities of its DataSource. Thrown at boot. @publicApi */
export class EntitiesNotRegisteredError extends GenevaDriveError {
  constructor(
    readonly dataSource: string,
    readonly missing: readonly string[],
  ) {
    super(
      `The TypeORM DataSource "${dataSource}" does not know geneva-drive's entities (${missing.join(', ')}): ` +
        'add GENEVA_DRIVE_ENTITIES to its entities, or set autoLoadEntities: true in TypeOrmModule.forRoot',
    );
  }
}
