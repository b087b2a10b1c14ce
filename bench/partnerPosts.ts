// A partner's post as the benchmarks send it: a flood report in Quezon City, and one POST of it.
import http from 'node:http';

export function feedBody(postId: number, createdMs: number): string {
  return JSON.stringify({
    post_id: postId,
    created_at: new Date(createdMs).toISOString(),
    partner_city: 'Quezon City',
    disaster_type: 'flood',
    location: { lat: 14.6516, lng: 121.0497 },
    title: 'Baha sa kalsada',
    text: 'Hanggang tuhod ang tubig.',
  });
}

/** POSTs `body` to `url` with the partner's key; the answer's status once it is read. */
export function postFeed(agent: http.Agent, url: string, body: string, apiKey: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'X-Api-Key': apiKey, 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
