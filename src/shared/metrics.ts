// Prometheus metrics (prom-client), one registry per runtime so tests and
// several runtimes in one process do not share counters.
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by route (until the last byte is sent)',
    labelNames: ['route', 'method'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly reports = new Counter({
    name: 'reports_total',
    help: 'Partner reports by outcome: accepted, duplicate, rejected',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly partnerReports = new Counter({
    name: 'partner_reports_total',
    help: 'Reports by the name of the partner key and outcome: accepted, duplicate, retracted',
    labelNames: ['partner', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly queueMessages = new Gauge({
    name: 'queue_messages',
    help: 'Messages in the ingest queue, by state (visible, in_flight), as last seen',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly flushDuration = new Histogram({
    name: 'worker_flush_duration_seconds',
    help: 'Time to write, store and acknowledge one flush',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly partBytes = new Histogram({
    name: 'worker_part_bytes',
    help: 'Size of the Parquet parts the worker writes',
    buckets: [1e3, 1e4, 1e5, 1e6, 1e7, 1e8],
    registers: [this.registry],
  });
  readonly flushedReports = new Counter({
    name: 'worker_reports_archived_total',
    help: 'Reports written to archive parts by the worker',
    registers: [this.registry],
  });
  readonly cacheRequests = new Counter({
    name: 'part_cache_requests_total',
    help: 'Archive part cache look-ups by result (hit, miss)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly s3DirectFallbacks = new Counter({
    name: 's3_direct_get_fallbacks_total',
    help: 'Ranged S3 GETs sent straight to the bucket and asked again through the SDK, by reason (the HTTP status, or error); a steady count of 403 is a signing fault',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly cacheBytes = new Gauge({
    name: 'part_cache_bytes',
    help: 'Bytes held in the local archive part cache',
    registers: [this.registry],
  });
  readonly jobRuns = new Counter({
    name: 'job_runs_total',
    help: 'Scheduled job ticks by job and result: ok, failed, missed (reached too late), overlapped (an earlier run still going here), skipped (the store failed while claiming it)',
    labelNames: ['job', 'result'] as const,
    registers: [this.registry],
  });

  /** Registries kept on other threads of this process (the worker thread of `all`). */
  private readonly elsewhere: (() => Promise<MetricsJson>)[] = [];

  constructor(options: { defaults?: boolean } = {}) {
    if (options.defaults) collectDefaultMetrics({ register: this.registry });
  }

  /** Adds another thread's metrics to what text() reports: same-named series are summed. */
  include(source: () => Promise<MetricsJson>): void {
    this.elsewhere.push(source);
  }

  /** The Prometheus text of this registry and of those include() added. */
  async text(): Promise<string> {
    if (this.elsewhere.length === 0) return this.registry.metrics();
    const all = await Promise.all([this.registry.getMetricsAsJSON(), ...this.elsewhere.map((source) => source())]);
    // Summed, every one: the aggregator prom-client gives a process metric (made for a cluster
    // of processes) omits it, and here one thread alone reports the process.
    return AggregatorRegistry.aggregate(all.map((metrics) => metrics.map((m) => ({ ...m, aggregator: 'sum' as const })))).metrics();
  }
}
