/**
 * The crash proof's workflow and tables, shared by the spec (under jest) and the worker process
 * (compiled with tsc and run by plain node). The library is imported by relative path, not as
 * 'geneva-drive': the compiled worker must load exactly one copy of it (the package's own entry
 * points at dist/), and under jest both spellings map to the same source file.
 */
import 'reflect-metadata';
import { Column, DataSource, Entity, PrimaryGeneratedColumn, Table, type QueryRunner } from 'typeorm';
import { GenevaWorkflow, ResumableStep, Step, StepIteration, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

/** Rows the step walks. */
@Entity({ name: 'crash_items' })
export class CrashItem {
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Column({ type: 'varchar', length: 32 })
  label: string;
}

/** One row per item processed, written (and committed) by the step before it checkpoints the item. */
@Entity({ name: 'crash_progress' })
export class CrashProgress {
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Column({ name: 'item_id', type: 'integer' })
  itemId: number;

  @Column({ name: 'execution_id', type: 'varchar', length: 40 })
  executionId: string;
}

export const CRASH_ENTITIES = [CrashItem, CrashProgress];

/** Checkpoints per execution: the chain has several executions before and after the kill. */
export const CRASH_CHUNK = 3_000;

/**
 * Walks every crash item with keyset pagination. For each item it first records the item (its own
 * committed INSERT: the side effect) and only then lets `overRecords` checkpoint the item's id.
 */
@Workflow({ hero: () => TestHero })
export class CrashWalkWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @ResumableStep({ maxIterations: CRASH_CHUNK })
  async walk(iter: StepIteration<number>) {
    const items = this.dataSource.getRepository(CrashItem).createQueryBuilder('i');
    const progress = this.dataSource.getRepository(CrashProgress);
    for await (const item of iter.overRecords(items, { batchSize: 200 })) {
      await progress.insert({ itemId: item.id, executionId: this.currentExecution.id });
    }
  }

  @Step()
  async done() {}
}

/** Creates the two tables (after `prepareDatabase`, which drops every table) and fills crash_items. */
export async function createCrashTables(queryRunner: QueryRunner, items: number): Promise<void> {
  await queryRunner.createTable(
    new Table({
      name: 'crash_items',
      columns: [
        { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
        { name: 'label', type: 'varchar', length: '32' },
      ],
    }),
    true,
  );
  await queryRunner.createTable(
    new Table({
      name: 'crash_progress',
      columns: [
        { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
        { name: 'item_id', type: 'integer' },
        { name: 'execution_id', type: 'varchar', length: '40' },
      ],
    }),
    true,
  );
  const manager = queryRunner.manager;
  for (let start = 1; start <= items; start += 500) {
    const rows = Array.from({ length: Math.min(500, items - start + 1) }, (_, i) => ({ label: `item-${start + i}` }));
    await manager.createQueryBuilder().insert().into(CrashItem).values(rows).execute();
  }
}
