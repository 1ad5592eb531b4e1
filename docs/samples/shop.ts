/**
 * The small shop the manual's samples are about: entities (the heroes) and the services the
 * workflows inject. Samples in this folder are type-checked with the test sources
 * (`npx tsc -p tsconfig.spec.json --noEmit`), and every TypeScript block of docs/MANUAL.md is a
 * verbatim excerpt of a file here or of apps/example/src (test/e2e/manual-samples.e2e-spec.ts).
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Column, DataSource, Entity, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { randomUUID } from 'node:crypto';

@Entity({ name: 'shop_orders' })
export class Order {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 255 })
  sku: string;

  @Column({ name: 'amount_cents', type: 'integer' })
  amountCents: number;

  @Column({ name: 'customer_email', type: 'varchar', length: 255, nullable: true })
  customerEmail: string | null;

  @Column({ type: 'varchar', length: 32, default: 'new' })
  status: 'new' | 'reserved' | 'paid' | 'shipped' | 'delivered';

  @Column({ type: 'boolean', default: false })
  pickup: boolean;

  @Column({ type: 'boolean', default: false })
  canceled: boolean;
}

/** A contract with a uuid key: heroes may have integer or string keys. */
@Entity({ name: 'shop_contracts' })
export class Contract {
  @PrimaryColumn({ type: 'varchar', length: 36 })
  id: string = randomUUID();

  @Column({ name: 'document_id', type: 'varchar', length: 64 })
  documentId: string;

  @Column({ name: 'pre_signed', type: 'boolean', default: false })
  preSigned: boolean;

  @Column({ name: 'countersigned', type: 'boolean', default: false })
  countersigned: boolean;
}

@Entity({ name: 'shop_customers' })
export class Customer {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 255 })
  email: string;
}

@Entity({ name: 'shop_campaigns' })
export class Campaign {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 255 })
  subject: string;
}

@Entity({ name: 'shop_subscribers' })
export class Subscriber {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ name: 'campaign_id', type: 'integer' })
  campaignId: number;

  @Column({ type: 'varchar', length: 255 })
  email: string;

  @Column({ type: 'boolean', default: false })
  mailed: boolean;
}

export const SHOP_ENTITIES = [Order, Contract, Customer, Campaign, Subscriber];

/** Raised by the carrier client when a request times out. */
export class CarrierTimeoutError extends Error {}

/** Raised by the payment provider when we call it too often; says when to come back. */
export class RateLimitedError extends Error {
  constructor(readonly retryAfterMs: number) {
    super(`rate limited, retry after ${retryAfterMs} ms`);
  }
}

/** Raised when an order was voided at the provider. */
export class OrderVoidedError extends Error {}

@Injectable()
export class PaymentsService {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async reserve(order: Order): Promise<void> {
    await this.dataSource.getRepository(Order).update(order.id, { status: 'reserved' });
  }

  async capture(order: Order, amountCents: number): Promise<void> {
    if (amountCents < order.amountCents) throw new Error(`captured ${amountCents} of ${order.amountCents} cents`);
    await this.dataSource.getRepository(Order).update(order.id, { status: 'paid' });
  }

  async hasCard(_order: Order): Promise<boolean> {
    return true;
  }

  async charge(_order: Order): Promise<'charged' | 'soft_decline' | 'already_paid'> {
    return 'charged';
  }
}

@Injectable()
export class ShippingService {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async ship(order: Order): Promise<void> {
    await this.dataSource.getRepository(Order).update(order.id, { status: 'shipped' });
  }

  async isDelivered(order: Order): Promise<boolean> {
    const fresh = await this.dataSource.getRepository(Order).findOneByOrFail({ id: order.id });
    return fresh.status === 'delivered';
  }
}

@Injectable()
export class Mailer {
  readonly sent: Array<{ to: string; subject: string }> = [];

  async send(to: string, subject: string): Promise<void> {
    this.sent.push({ to, subject });
  }
}
