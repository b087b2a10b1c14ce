// The queue port: at-least-once delivery with visibility timeouts, as SQS gives.

export interface QueueMessage {
  id: string;
  body: string;
  /** Handle for delete / changeVisibility; valid for this delivery only. */
  receipt: string;
  /** How many times this message has been delivered, this one included. */
  receiveCount: number;
}

export interface ReceiveOptions {
  maxMessages: number;
  waitSeconds: number;
  visibilitySeconds: number;
  /**
   * Ends a long poll early with no messages (a stopping consumer). On SQS the abandoned poll
   * may still take a message server-side; it returns after `visibilitySeconds`, as any unacked one.
   */
  signal?: AbortSignal;
}

export interface QueueDepth {
  visible: number;
  inFlight: number;
}

export interface Queue {
  readonly description: string;
  send(bodies: readonly string[]): Promise<void>;
  receive(options: ReceiveOptions): Promise<QueueMessage[]>;
  delete(receipts: readonly string[]): Promise<void>;
  changeVisibility(receipt: string, seconds: number): Promise<void>;
  /**
   * Keeps received messages hidden `seconds` more from now (a consumer still holding them). A
   * receipt no longer valid (deleted, or delivered again since) is passed over.
   */
  extend(receipts: readonly string[], seconds: number): Promise<void>;
  depth(): Promise<QueueDepth>;
  /** Throws UnavailableError when the queue cannot be reached. */
  ping(): Promise<void>;
  close(): void;
}
