import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

/** The example's contracts table. */
export class CreateExampleContracts1700000000001 implements MigrationInterface {
  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'example_contracts',
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'document_id', type: 'varchar', length: '255' },
          { name: 'status', type: 'varchar', length: '32', default: "'awaiting_signature'" },
          { name: 'signed_by', type: 'varchar', length: '255', isNullable: true },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('example_contracts');
  }
}
