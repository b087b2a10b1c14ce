// A Server-Sent Events client for the tests: reads a stream over fetch and parses its events.
export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

export interface SseClient {
  status: number;
  headers: Headers;
  events: SseEvent[];
  /** Comment lines (heartbeats) seen. */
  comments: string[];
  /** The last id the server sent, with an event or alone: what EventSource reconnects with. */
  lastEventId: string | undefined;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

export async function openStream(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const client: SseClient = { status: res.status, headers: res.headers, events: [], comments: [], lastEventId: undefined, ended: Promise.resolve(), close: () => controller.abort() };
  if (res.status !== 200 || !res.body) {
    await res.text().catch(() => undefined);
    return client;
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  client.ended = (async () => {
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event: SseEvent = { id: undefined, event: 'message', data: '' };
          let hasData = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) client.comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) event.id = line.slice(4);
            else if (line.startsWith('event: ')) event.event = line.slice(7);
            else if (line.startsWith('data: ')) {
              event.data += (hasData ? '\n' : '') + line.slice(6);
              hasData = true;
            }
          }
          if (event.id !== undefined) client.lastEventId = event.id;
          if (hasData) client.events.push(event);
        }
      }
    } catch {
      // aborted by close()
    }
  })();
  return client;
}
