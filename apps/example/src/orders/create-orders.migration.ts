import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

/** The example's own table; geneva-drive's migrations run next to it. */
export class CreateExampleOrders1700000000000 implements MigrationInterface {
  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'example_orders',
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'sku', type: 'varchar', length: '255' },
          { name: 'amount_cents', type: 'integer' },
          { name: 'status', type: 'varchar', length: '32', default: "'new'" },
          { name: 'pickup', type: 'boolean', default: false },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('example_orders');
  }
}
