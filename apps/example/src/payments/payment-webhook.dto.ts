import { IsInt, IsNotEmpty, IsString, Min } from 'class-validator';

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
}
