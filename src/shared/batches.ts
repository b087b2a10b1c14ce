// Items cut into the batches an AWS batch call takes: at most so many items, and so many bytes of
// them in all (SQS's SendMessageBatch, SNS's PublishBatch refuse a whole call past either).

/** `items` in order, in batches of at most `count` items and `bytes` bytes (a lone larger item alone). */
export function batchesBy<T>(items: readonly T[], count: number, bytes: number, sizeOf: (item: T) => number): T[][] {
  const out: T[][] = [];
  let batch: T[] = [];
  let total = 0;
  for (const item of items) {
    const size = sizeOf(item);
    if (batch.length > 0 && (batch.length === count || total + size > bytes)) {
      out.push(batch);
      batch = [];
      total = 0;
    }
    batch.push(item);
    total += size;
  }
  if (batch.length > 0) out.push(batch);
  return out;
}
