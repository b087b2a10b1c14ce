// The queue's settings shared by bootstrap (emulators, the embedded default) and the
// infrastructure code: keep both in step through this one place.

export const QUEUE_SETTINGS = {
  maxReceiveCount: 5,
  retentionSeconds: 14 * 24 * 3600,
  /** QUEUE_VISIBILITY_SECONDS unless set: two flushes and a margin for a slow one. */
  visibilityTimeoutSeconds: (flushIntervalSeconds: number) => Math.ceil(flushIntervalSeconds * 2 + 30),
};

export function deadLetterQueueName(queueName: string): string {
  return `${queueName}-dlq`;
}
