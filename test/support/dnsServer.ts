// A DNS server on a UDP port of this host, answering A queries from a table: a webhook host's
// name resolved by the service's own resolver, as on the network. A name in `silent` is never
// answered (name servers that do not answer); any other gets an empty answer.
import dgram from 'node:dgram';

export interface DnsServer {
  address: string;
  queries: number;
  close(): Promise<void>;
}

export async function startDnsServer(answers: Record<string, string>, silent: readonly string[] = []): Promise<DnsServer> {
  const socket = dgram.createSocket('udp4');
  const server: DnsServer = { address: '', queries: 0, close: () => new Promise((resolve) => socket.close(() => resolve())) };
  socket.on('message', (query, from) => {
    server.queries += 1;
    // The question: labels up to a zero byte, then its type and class.
    const labels: string[] = [];
    let at = 12;
    while (at < query.length && query[at] !== 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString('ascii'));
      at += 1 + query[at]!;
    }
    const questionEnd = at + 5;
    const name = labels.join('.').toLowerCase();
    const type = query.readUInt16BE(at + 1);
    if (silent.includes(name)) return;
    const ip = type === 1 ? answers[name] : undefined;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2);
    header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, no error
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(ip ? 1 : 0, 6);
    const parts = [header, query.subarray(12, questionEnd)];
    if (ip) {
      const answer = Buffer.alloc(16);
      answer.writeUInt16BE(0xc00c, 0); // the question's name
      answer.writeUInt16BE(1, 2); // A
      answer.writeUInt16BE(1, 4); // IN
      answer.writeUInt32BE(60, 6);
      answer.writeUInt16BE(4, 10);
      ip.split('.').forEach((octet, i) => answer.writeUInt8(Number(octet), 12 + i));
      parts.push(answer);
    }
    socket.send(Buffer.concat(parts), from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  server.address = `127.0.0.1:${socket.address().port}`;
  return server;
}
