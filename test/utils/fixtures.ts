/**
 * Hero entities for the engine tests: one with an integer key, one with a uuid key set by the app,
 * and the migration that creates their tables (timestamped before geneva-drive's, so it runs first).
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Column, Entity, PrimaryColumn, PrimaryGeneratedColumn, Table, type MigrationInterface, type QueryRunner } from 'typeorm';
import { columnTypes, dialectOf } from '../../libs/geneva-drive/src/migrations/column-types.js';

/** A hero with an autoincrement integer key. */
@Entity({ name: 'test_heroes' })
export class TestHero {
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Column({ type: 'varchar', length: 255, default: '' })
  name: string;

  @Column({ type: 'boolean', default: true })
  active: boolean;

  @Column({ type: 'boolean', default: false })
  canceled: boolean;
}

/** A hero whose key is a uuid string chosen by the application, not the database. */
@Entity({ name: 'test_uuid_heroes' })
export class UuidHero {
  /** Assigned on `new UuidHero()` / `repository.create()`; rows loaded from the database keep theirs. */
  @PrimaryColumn({ type: 'varchar', length: 36 })
  id: string = randomUUID();

  @Column({ type: 'varchar', length: 255, default: '' })
  name: string;
}

export const FIXTURE_ENTITIES = [TestHero, UuidHero];

export class CreateTestFixtures1600000000000 implements MigrationInterface {
  name = 'CreateTestFixtures1600000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const t = columnTypes(dialectOf(queryRunner));
    await queryRunner.createTable(
      new Table({
        name: 'test_heroes',
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'name', type: 'varchar', length: '255', isNullable: false, default: `''` },
          t.boolean('active', true),
          t.boolean('canceled', false),
        ],
      }),
    );
    await queryRunner.createTable(
      new Table({
        name: 'test_uuid_heroes',
        columns: [
          { name: 'id', type: 'varchar', length: '36', isPrimary: true },
          { name: 'name', type: 'varchar', length: '255', isNullable: false, default: `''` },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('test_uuid_heroes', true);
    await queryRunner.dropTable('test_heroes', true);
  }
}

/** Table names of the fixtures, children before parents (there are no foreign keys between them). */
export const FIXTURE_TABLES = ['test_uuid_heroes', 'test_heroes'];
