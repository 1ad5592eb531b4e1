import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** A contract sent out for signature; its workflow waits for the signature of `documentId`. */
@Entity({ name: 'example_contracts' })
export class Contract {
  @PrimaryGeneratedColumn()
  id: number;

  /** The document the signature provider knows (a new version of the document gets a new id). */
  @Column({ name: 'document_id', type: 'varchar', length: 255 })
  documentId: string;

  @Column({ type: 'varchar', length: 32, default: 'awaiting_signature' })
  status: 'awaiting_signature' | 'signed' | 'expired';

  @Column({ name: 'signed_by', type: 'varchar', length: 255, nullable: true })
  signedBy: string | null;
}
