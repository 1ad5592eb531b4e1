import { IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Min } from 'class-validator';

/** What the payment provider posts when a payment settles. */
export class PaymentWebhookDto {
  @IsString()
  @IsNotEmpty()
  eventId: string;

  @IsInt()
  @Min(1)
  orderId: number;

  @IsInt()
  @Min(0)
  amountCents: number;

  /** Free-form provider data, kept in the signal's payload (and so subject to maxSignalPayloadSize). */
  @IsOptional()
  @IsObject()
  metadata?: Record<string, unknown>;
}
