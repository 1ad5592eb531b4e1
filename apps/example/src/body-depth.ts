/**
 * JSON bodies nested deeper than this are answered 400 before the DTO transform, whose recursive
 * copy (class-transformer) would overflow the stack on a body thousands of levels deep. It is well
 * past geneva-drive's own payload limit (100 levels), which the webhook answers 400 as well.
 */
export const MAX_BODY_DEPTH = 256;

/** Express middleware, after the JSON body parser. */
export function bodyDepthGuard(req: { body?: unknown }, res: { status(code: number): { json(body: unknown): void } }, next: () => void): void {
  if (nestingDepth(req.body) > MAX_BODY_DEPTH) {
    res.status(400).json({ statusCode: 400, error: 'Bad Request', message: `JSON body nested deeper than ${MAX_BODY_DEPTH} levels` });
    return;
  }
  next();
}

/** How deep objects and arrays nest, walked with a stack of its own (recursion is what overflows); stops past the limit. */
function nestingDepth(value: unknown): number {
  let deepest = 0;
  const pending: Array<[unknown, number]> = [[value, 1]];
  while (pending.length > 0 && deepest <= MAX_BODY_DEPTH) {
    const [item, depth] = pending.pop()!;
    if (item === null || typeof item !== 'object') continue;
    deepest = Math.max(deepest, depth);
    for (const child of Object.values(item)) pending.push([child, depth + 1]);
  }
  return deepest;
}
