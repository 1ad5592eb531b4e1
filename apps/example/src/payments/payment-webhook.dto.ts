import { IsObject, IsOptional } from 'class-validator';
import { IsEventId, IsIntegerFrom } from '../validation.js';

/** What the payment provider posts when a payment settles. */
export class PaymentWebhookDto {
  @IsEventId()
  eventId: string;

  @IsIntegerFrom(1)
  orderId: number;

  @IsIntegerFrom(0)
  amountCents: number;

  /**
   * Free-form provider data, kept in the signal's payload exactly (and so subject to
   * maxSignalPayloadSize and the payload depth limit).
   */
  @IsOptional()
  @IsObject()
  metadata?: Record<string, unknown>;
}
