import { BadRequestException, Injectable, type PipeTransform } from '@nestjs/common';
import { IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';

/** The largest value of an `integer` column (the example's ids and amounts), the same on every database. */
export const MAX_INTEGER = 2_147_483_647;

/**
 * A provider's event id, used as the signal's idempotency key: printable ASCII without spaces (so
 * no NUL, no blank id), at most 255 characters — what geneva-drive accepts as a key.
 */
export function IsEventId(): PropertyDecorator {
  return combine(IsString(), MaxLength(255), Matches(/^[\x21-\x7E]+$/, { message: '$property must be printable ASCII without spaces' }));
}

/** An integer from `min` to {@link MAX_INTEGER}: an id or an amount that fits its column. */
export function IsIntegerFrom(min: number): PropertyDecorator {
  return combine(IsInt(), Min(min), Max(MAX_INTEGER));
}

function combine(...decorators: PropertyDecorator[]): PropertyDecorator {
  return (target, property) => {
    for (const decorator of decorators) decorator(target, property);
  };
}

/** A route's `:id`: an integer from 1 to {@link MAX_INTEGER}, else 400 (a larger one is no row, and no query). */
@Injectable()
export class ParseIdPipe implements PipeTransform<string, number> {
  transform(value: string): number {
    const id = Number(value);
    if (!/^\d+$/.test(value) || id < 1 || id > MAX_INTEGER) throw new BadRequestException(`id must be an integer from 1 to ${MAX_INTEGER}, got ${JSON.stringify(value)}`);
    return id;
  }
}
