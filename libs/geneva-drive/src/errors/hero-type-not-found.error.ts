import { GenevaDriveError } from './geneva-drive.error.js';

/** The stored hero type names an entity this DataSource does not know (renamed or removed). @publicApi */
export class HeroTypeNotFoundError extends GenevaDriveError {
  constructor(readonly heroType: string) {
    super(`Hero type "${heroType}" is not an entity of the DataSource geneva-drive uses`);
  }
}
