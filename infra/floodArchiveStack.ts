// The service on AWS: the archive bucket, the report queue and its dead-letter
// queue, three Fargate services running one image (API behind a load balancer,
// worker, scheduler), one least-privilege role per process, alarms, and the
// Glue table that lets Athena query the Parquet archive in place.
import { Aws, CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as acm from 'aws-cdk-lib/aws-certificatemanager';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as ecsPatterns from 'aws-cdk-lib/aws-ecs-patterns';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as glue from 'aws-cdk-lib/aws-glue';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { ARCHIVE_TABLE_DDL } from '../src/archive/partColumns.js';
import { deadLetterQueueName, QUEUE_SETTINGS } from '../src/queue/settings.js';
import { CURSOR_SECRET_KEY } from '../src/http/cursorSecret.js';
import { ANNOUNCING_PREFIX, EVENT_LOG_PREFIX, RETRACTED_PREFIX } from '../src/events/objectEventLog.js';
import { WRITE_PROBE_KEY } from '../src/http/readiness.js';
import { IDEMPOTENCY_PREFIX, PENDING_PREFIX, RECONCILE_TURNS_PREFIX, REPORTS_PREFIX, RETRACTIONS_PREFIX, UNPURGED_PREFIX, WHOLE_DAY } from '../src/store/layout.js';

export interface FloodArchiveStackProps extends StackProps {
  /** ECR repository holding the service image (one image runs every process). */
  imageRepositoryName: string;
  /** Tag to run. Deploy a new tag (e.g. the commit) to roll the services: ECS does not re-pull a moved tag. */
  imageTag: string;
  /** The worker's buffering interval; the queue's visibility timeout follows from it. Default 30. */
  flushIntervalSeconds?: number;
  /** Name of the report queue; the dead-letter queue is named after it. Default `flood-reports`. */
  queueName?: string;
  apiDesiredCount?: number;
  workerDesiredCount?: number;
  /** ACM certificate for HTTPS on the load balancer (443; port 80 redirects to it). Required unless `allowPlainHttp`. */
  certificateArn?: string;
  /**
   * Serve plain HTTP on port 80 when no certificate is given: partner keys and reports then cross
   * the internet in clear. Only for a trial without real keys; the stack refuses otherwise.
   */
  allowPlainHttp?: boolean;
  /**
   * The address clients reach the API at (e.g. `https://floods.example.org`): the base of the
   * absolute URLs in answers (PUBLIC_BASE_URL). Default: the load balancer's own name (https with
   * a certificate); set it to the certificate's domain name.
   */
  publicBaseUrl?: string;
  /**
   * First and last year Athena's partition projection enumerates: reports created outside them are
   * archived and served, but Athena does not see them. Default [2010, 2050].
   */
  archiveYears?: [number, number];
  /** Glue database that holds the `reports` table. Default `flood_archive`. */
  glueDatabaseName?: string;
  /**
   * Lets anyone read the releases (`releases/`, immutable citable snapshots) straight from the
   * bucket, so researchers pull them at S3's speed without the API. Default false: the bucket
   * stays private and the API serves them.
   */
  publicReleases?: boolean;
}

type Process = 'api' | 'worker' | 'scheduler';

/** Where the API serves Prometheus metrics: not the port the load balancer forwards to. */
export const METRICS_PORT = 9464;

export class FloodArchiveStack extends Stack {
  readonly bucket: s3.Bucket;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly api: ecsPatterns.ApplicationLoadBalancedFargateService;
  readonly worker: ecs.FargateService;
  readonly scheduler: ecs.FargateService;
  readonly taskRoles: Record<Process, iam.Role>;
  readonly apiKeys: secretsmanager.Secret;
  /** Archived reports, announced by the worker (SNS_TOPIC_ARN); subscribers filter on `city` and `local_area`. */
  readonly reportsTopic: sns.Topic;

  constructor(scope: Construct, id: string, props: FloodArchiveStackProps) {
    super(scope, id, props);
    if (!props.certificateArn && props.allowPlainHttp !== true) {
      throw new Error(
        'The API needs a TLS certificate: give certificateArn (an ACM certificate ARN; the load balancer then serves HTTPS on 443 and redirects 80 to it). ' +
          'To serve partner keys over plain HTTP anyway (a trial without real keys), set allowPlainHttp.',
      );
    }
    const flushIntervalSeconds = props.flushIntervalSeconds ?? 30;

    this.bucket = archiveBucket(this, props.publicReleases === true);
    [this.queue, this.deadLetterQueue] = reportQueues(this, props.queueName ?? 'flood-reports', flushIntervalSeconds);
    this.reportsTopic = new sns.Topic(this, 'ReportsTopic', { displayName: 'Archived flood reports', enforceSSL: true });
    this.taskRoles = {
      api: taskRole(this, 'ApiTaskRole', apiPermissions(this.bucket, this.queue)),
      // Only the worker announces: it alone knows when parts are durable.
      worker: taskRole(this, 'WorkerTaskRole', [...workerPermissions(this.bucket, this.queue), allow(['sns:Publish'], [this.reportsTopic.topicArn])]),
      scheduler: taskRole(this, 'SchedulerTaskRole', schedulerPermissions(this.bucket, this.queue, this.deadLetterQueue)),
    };
    // The queue is trusted (a worker archives a message's report on its first delivery without
    // asking the ledger), so no one but the three processes may send to it, an admin included.
    this.queue.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'OnlyTheServiceSends',
        effect: iam.Effect.DENY,
        principals: [new iam.AnyPrincipal()],
        actions: ['sqs:SendMessage'],
        resources: [this.queue.queueArn],
        conditions: { ArnNotEquals: { 'aws:PrincipalArn': Object.values(this.taskRoles).map((role) => role.roleArn) } },
      }),
    );
    // Partner keys. Starts with one generated key; add more (comma-separated) in the secret
    // and restart the API tasks. Kept on stack deletion: partners hold these keys.
    this.apiKeys = new secretsmanager.Secret(this, 'ApiKeys', {
      description: 'API_KEYS of the flood report API: comma-separated partner keys',
      generateSecretString: { passwordLength: 40, excludePunctuation: true },
      removalPolicy: RemovalPolicy.RETAIN,
    });

    const vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 1,
      // Archive traffic goes to S3 directly, not through the NAT (which bills per GB).
      gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3 } },
    });
    const cluster = new ecs.Cluster(this, 'Cluster', { vpc });
    const image = ecs.ContainerImage.fromEcrRepository(
      ecr.Repository.fromRepositoryName(this, 'ImageRepository', props.imageRepositoryName),
      props.imageTag,
    );
    const environment = {
      STORAGE_URL: `s3://${this.bucket.bucketName}/`,
      QUEUE_URL: this.queue.queueUrl,
      AWS_REGION: this.region,
      FLUSH_INTERVAL_SECONDS: String(flushIntervalSeconds),
    };
    const container = (name: Process, command: string): ProcessContainer => ({
      name,
      image,
      entryPoint: ['node', 'dist/src/main/flood-archive.cjs'],
      command: [command],
      environment,
      logDriver: ecs.LogDrivers.awsLogs({
        streamPrefix: name,
        logGroup: new logs.LogGroup(this, `${pascal(name)}Logs`, { retention: logs.RetentionDays.ONE_MONTH }),
      }),
    });

    this.api = apiService(this, {
      cluster,
      desiredCount: props.apiDesiredCount ?? 2,
      taskRole: this.taskRoles.api,
      // Behind the load balancer: trust one proxy hop, so rate limits key on the client's address.
      // Keep-alive connections outlive the load balancer's (60 s idle), so it never reuses one the API just closed.
      // Metrics on a port of their own, which the load balancer never reaches (it forwards to 8080,
      // and the tasks admit it on 8080 alone): a scraper in the task or the VPC reads them.
      container: {
        ...container('api', 'serve'),
        environment: { ...environment, TRUST_PROXY: '1', HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: '65', METRICS_PORT: String(METRICS_PORT) },
      },
      secrets: { API_KEYS: ecs.Secret.fromSecretsManager(this.apiKeys) },
      ...(props.certificateArn && {
        certificate: acm.Certificate.fromCertificateArn(this, 'Certificate', props.certificateArn),
      }),
    });
    // After the load balancer exists: its name is the default public address.
    const balancer = `${props.certificateArn ? 'https' : 'http'}://${this.api.loadBalancer.loadBalancerDnsName}`;
    // The scheduler's too: the releases it makes cite their URL (CITATION.cff), never rewritten.
    this.api.taskDefinition.defaultContainer!.addEnvironment('PUBLIC_BASE_URL', props.publicBaseUrl ?? balancer);
    this.worker = backgroundService(this, 'Worker', {
      cluster,
      desiredCount: props.workerDesiredCount ?? 1,
      taskRole: this.taskRoles.worker,
      size: { cpu: 512, memoryLimitMiB: 1024 },
      container: { ...container('worker', 'worker'), environment: { ...environment, SNS_TOPIC_ARN: this.reportsTopic.topicArn } },
      // SIGTERM makes the worker flush its buffer; give it the Fargate maximum before SIGKILL.
      stopTimeout: Duration.seconds(120),
    });
    this.scheduler = backgroundService(this, 'Scheduler', {
      cluster,
      // Exactly one: stop the old task before starting the new one on deploys. Job leases
      // under jobs/ still guard against overlap; this keeps them from being contended.
      desiredCount: 1,
      minHealthyPercent: 0,
      maxHealthyPercent: 100,
      taskRole: this.taskRoles.scheduler,
      // Compaction rewrites an hour's parts with DuckDB.
      size: { cpu: 1024, memoryLimitMiB: 2048 },
      container: container('scheduler', 'scheduler'),
      // Ops commands run as one-off tasks of this definition: `keys add` must see the names in
      // API_KEYS (a partner's name, reports and rights) to refuse them, as it does on a laptop.
      secrets: { API_KEYS: ecs.Secret.fromSecretsManager(this.apiKeys) },
      // SIGTERM lets runs under way end for up to 100 s, then stops them at their next step and
      // gives their leases back, and their locks once they stopped (5 s at most).
      stopTimeout: Duration.seconds(120),
    });
    this.scheduler.taskDefinition.defaultContainer!.addEnvironment('PUBLIC_BASE_URL', props.publicBaseUrl ?? balancer);
    // Every process publishes the default boundaries when cities/ is empty, but only the
    // scheduler may write there: on a first deployment it must start before the others.
    this.api.service.node.addDependency(this.scheduler);
    this.worker.node.addDependency(this.scheduler);

    const alarmTopic = new sns.Topic(this, 'AlarmTopic', { enforceSSL: true });
    for (const alarm of this.alarms(flushIntervalSeconds)) alarm.addAlarmAction(new cwActions.SnsAction(alarmTopic));

    athenaTable(this, {
      bucket: this.bucket,
      databaseName: props.glueDatabaseName ?? 'flood_archive',
      years: props.archiveYears ?? [2010, 2050],
    });

    const lbScheme = props.certificateArn ? 'https' : 'http';
    new CfnOutput(this, 'BucketName', { value: this.bucket.bucketName });
    new CfnOutput(this, 'QueueUrl', { value: this.queue.queueUrl });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.deadLetterQueue.queueUrl });
    new CfnOutput(this, 'LoadBalancerUrl', { value: `${lbScheme}://${this.api.loadBalancer.loadBalancerDnsName}` });
    new CfnOutput(this, 'ApiKeysSecretArn', { value: this.apiKeys.secretArn });
    new CfnOutput(this, 'AlarmTopicArn', { value: alarmTopic.topicArn });
    new CfnOutput(this, 'ReportsTopicArn', { value: this.reportsTopic.topicArn });
  }

  /** What ops must hear about: poison messages, a stalled worker, a failing API. */
  private alarms(flushIntervalSeconds: number): cloudwatch.Alarm[] {
    const minute = Duration.minutes(1);
    const deadLetters = new cloudwatch.Alarm(this, 'DeadLetterQueueNotEmpty', {
      alarmDescription: `Reports failed ${QUEUE_SETTINGS.maxReceiveCount} times and wait in the dead-letter queue: inspect, fix, then run dlq redrive as a one-off task of the scheduler's task definition (the console's redrive is refused: only the service sends to the queue).`,
      metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: minute, statistic: 'Maximum' }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    // A healthy worker empties the queue every flush interval; ten of them means it is not keeping up.
    const queueAge = new cloudwatch.Alarm(this, 'OldestMessageAge', {
      alarmDescription: 'Accepted reports are not reaching the archive: workers down or too few.',
      metric: this.queue.metricApproximateAgeOfOldestMessage({ period: minute, statistic: 'Maximum' }),
      threshold: 10 * flushIntervalSeconds,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const lb = this.api.loadBalancer.metrics;
    const errorRate = new cloudwatch.MathExpression({
      expression: 'IF(requests > 0, 100 * FILL(errors, 0) / requests, 0)',
      usingMetrics: {
        errors: lb.httpCodeTarget(elbv2.HttpCodeTarget.TARGET_5XX_COUNT, { period: minute, statistic: 'Sum' }),
        requests: lb.requestCount({ period: minute, statistic: 'Sum' }),
      },
      period: minute,
      label: 'API 5xx, % of requests',
    });
    const api5xx = new cloudwatch.Alarm(this, 'Api5xxRate', {
      alarmDescription: 'More than 5% of API requests end in a 5xx (storage or queue down, or a bug).',
      metric: errorRate,
      threshold: 5,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    return [deadLetters, queueAge, api5xx];
  }
}

function archiveBucket(scope: Construct, publicReleases: boolean): s3.Bucket {
  const bucket = new s3.Bucket(scope, 'ArchiveBucket', {
    versioned: true,
    encryption: s3.BucketEncryption.S3_MANAGED,
    // Public releases need a bucket policy that grants reads; ACLs stay blocked either way.
    blockPublicAccess: publicReleases ? new s3.BlockPublicAccess({ blockPublicAcls: true, ignorePublicAcls: true, blockPublicPolicy: false, restrictPublicBuckets: false }) : s3.BlockPublicAccess.BLOCK_ALL,
    enforceSSL: true,
    // The archive is the system of record: deleting the stack must not delete it.
    removalPolicy: RemovalPolicy.RETAIN,
    lifecycleRules: [
      {
        // Every accepted report writes a pending marker that the worker deletes within a
        // flush interval; versioning would otherwise keep each one and its delete marker forever.
        id: 'pending-markers',
        prefix: PENDING_PREFIX,
        noncurrentVersionExpiration: Duration.days(1),
        expiredObjectDeleteMarker: true,
      },
      {
        // Versions are a safety net against a bad compaction or a wrong delete, not an archive.
        id: 'noncurrent-versions',
        noncurrentVersionExpiration: Duration.days(30),
        abortIncompleteMultipartUploadAfter: Duration.days(7),
      },
    ],
  });
  if (publicReleases) {
    bucket.addToResourcePolicy(
      new iam.PolicyStatement({ sid: 'PublicReleases', actions: ['s3:GetObject'], principals: [new iam.AnyPrincipal()], resources: [bucket.arnForObjects('releases/*')] }),
    );
  }
  return bucket;
}

/** The queue and its dead-letter queue, with the settings the service's own bootstrap uses. */
function reportQueues(scope: Construct, queueName: string, flushIntervalSeconds: number): [sqs.Queue, sqs.Queue] {
  const retentionPeriod = Duration.seconds(QUEUE_SETTINGS.retentionSeconds);
  const common = { retentionPeriod, encryption: sqs.QueueEncryption.SQS_MANAGED, enforceSSL: true };
  const deadLetterQueue = new sqs.Queue(scope, 'DeadLetterQueue', { ...common, queueName: deadLetterQueueName(queueName) });
  const queue = new sqs.Queue(scope, 'ReportQueue', {
    ...common,
    queueName,
    // Longer than a flush interval, so a message is not redelivered while its report sits in a buffer.
    visibilityTimeout: Duration.seconds(QUEUE_SETTINGS.visibilityTimeoutSeconds(flushIntervalSeconds)),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: QUEUE_SETTINGS.maxReceiveCount },
  });
  return [queue, deadLetterQueue];
}

// --- Permissions: explicit actions on explicit key prefixes, one role per process. ---

function allow(actions: string[], resources: string[]): iam.PolicyStatement {
  return new iam.PolicyStatement({ actions, resources });
}

function objects(bucket: s3.IBucket, ...prefixes: string[]): string[] {
  return prefixes.map((prefix) => bucket.arnForObjects(`${prefix}/*`));
}

/** Accepts and retracts reports (under ingest/) and answers reads; deletes only a pending marker, never writes the archive or the partner keys. */
function apiPermissions(bucket: s3.IBucket, queue: sqs.IQueue): iam.PolicyStatement[] {
  return [
    // ListBucket also makes a HEAD on a missing key answer 404 rather than 403.
    allow(['s3:ListBucket'], [bucket.bucketArn]),
    allow(['s3:GetObject'], objects(bucket, 'ingest', 'reports', 'ready', 'stats', 'cities')),
    // The releases it serves read-only (GET /releases).
    allow(['s3:GetObject'], objects(bucket, 'releases')),
    // The change logs and their retention record: what an updated_after sync reads.
    allow(['s3:GetObject'], objects(bucket, 'changes')),
    // Under ingest/, only what accepting and retracting write (src/ledger/objectLedger.ts) and the
    // readiness probe; never ingest/api-keys/, which the keys command alone writes.
    allow(
      ['s3:PutObject'],
      [
        ...[PENDING_PREFIX, IDEMPOTENCY_PREFIX, RETRACTIONS_PREFIX, UNPURGED_PREFIX].map((prefix) => bucket.arnForObjects(`${prefix}*`)),
        bucket.arnForObjects(WRITE_PROBE_KEY),
      ],
    ),
    // The generated key of pagination cursors, created once by the first API task (src/http/cursorSecret.ts).
    allow(['s3:GetObject', 's3:PutObject'], [bucket.arnForObjects(CURSOR_SECRET_KEY)]),
    // The event log: read for the live stream and CAP, appended to (the report marked, the announcement claimed) when a partner retracts.
    allow(['s3:GetObject', 's3:PutObject'], [EVENT_LOG_PREFIX, RETRACTED_PREFIX, ANNOUNCING_PREFIX].map((prefix) => bucket.arnForObjects(`${prefix}*`))),
    // Its own pending marker, when the report was accepted by another post between its reads and
    // its writes (src/ledger/objectLedger.ts acceptOne): left, it would be sent and stored again.
    // IAM cannot tell its own from another's: the role may delete any pending marker.
    allow(['s3:DeleteObject'], [bucket.arnForObjects(`${PENDING_PREFIX}*`)]),
    allow(['sqs:SendMessage', 'sqs:GetQueueAttributes'], [queue.queueArn]),
  ];
}

/** Appends parts and clears pending markers; cannot delete idempotency keys or touch the published boundaries. */
function workerPermissions(bucket: s3.IBucket, queue: sqs.IQueue): iam.PolicyStatement[] {
  return [
    allow(['s3:ListBucket'], [bucket.bucketArn]),
    allow(['s3:GetObject'], objects(bucket, 'ingest')),
    allow(['s3:DeleteObject'], [bucket.arnForObjects(`${PENDING_PREFIX}*`)]),
    allow(['s3:GetObject'], objects(bucket, 'cities')),
    // Each part with its ready texts (ready/: the reports serialised once, for readers) and its
    // stats sidecar (stats/: the columns counts are made of).
    allow(['s3:PutObject'], objects(bucket, 'reports', 'ready', 'stats', 'dead-letter')),
    // A sidecar that cannot be built is left out, and the one a part written again had is
    // deleted (src/archive/sidecars/storeSidecars.ts): sidecars only, never a part.
    allow(['s3:DeleteObject'], objects(bucket, 'ready', 'stats')),
    // Each flush's change log (updated_after), once its parts are durable.
    allow(['s3:PutObject'], objects(bucket, 'changes')),
    // The worker process also reconciles: it rewrites a re-enqueued marker to restart its age,
    // and creates (If-None-Match) an idempotency key the API never got to write.
    allow(['s3:PutObject'], [bucket.arnForObjects(`${PENDING_PREFIX}*`), bucket.arnForObjects(`${IDEMPOTENCY_PREFIX}*`)]),
    // Its reconciliation timer takes a period's turn (created if absent) and clears old turns.
    allow(['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], [bucket.arnForObjects(`${RECONCILE_TURNS_PREFIX}*`)]),
    // Events: it appends to the log and prunes it, reads the webhook subscriptions, advances the
    // consumers' cursors (webhooks, SNS) and sets failed batches aside.
    allow(['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], objects(bucket, 'events')),
    allow(
      ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes', 'sqs:SendMessage'],
      [queue.queueArn],
    ),
  ];
}

/** Compaction, reconciliation, reprocessing, boundary publishing, dead-letter redrive (ops run these as one-off tasks of its definition). */
function schedulerPermissions(bucket: s3.IBucket, queue: sqs.IQueue, deadLetterQueue: sqs.IQueue): iam.PolicyStatement[] {
  return [
    allow(['s3:ListBucket'], [bucket.bucketArn]),
    allow(['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], objects(bucket, 'reports', 'ready', 'stats', 'ingest', 'cities', 'jobs', 'events')),
    // Reprocessing logs what it re-tags; compaction prunes the change logs past SYNC_RETENTION_DAYS.
    allow(['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], objects(bucket, 'changes')),
    // The monthly release: files created once (If-None-Match); the STAC index rewritten. Deletes
    // only what no manifest publishes: a dead run's files, which may hold reports retracted since
    // (under the period's lock; a published release's files are never deleted, and the bucket's
    // versions keep any deleted object 30 days).
    allow(['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], objects(bucket, 'releases')),
    allow(['sqs:SendMessage', 'sqs:GetQueueAttributes'], [queue.queueArn]),
    // `dlq list` finds the queue by name and makes what it peeked at visible again; `dlq redrive` deletes.
    allow(
      ['sqs:GetQueueUrl', 'sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
      [deadLetterQueue.queueArn],
    ),
  ];
}

function taskRole(scope: Construct, id: string, statements: iam.PolicyStatement[]): iam.Role {
  const role = new iam.Role(scope, id, { assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com') });
  for (const statement of statements) role.addToPolicy(statement);
  return role;
}

// --- Services ---

/** One container of the shared image; the command picks the process. */
interface ProcessContainer {
  name: Process;
  image: ecs.ContainerImage;
  entryPoint: string[];
  command: string[];
  environment: Record<string, string>;
  logDriver: ecs.LogDriver;
}

interface ServiceParts {
  cluster: ecs.ICluster;
  desiredCount: number;
  taskRole: iam.IRole;
  container: ProcessContainer;
}

function apiService(
  scope: Construct,
  parts: ServiceParts & { secrets: Record<string, ecs.Secret>; certificate?: acm.ICertificate },
): ecsPatterns.ApplicationLoadBalancedFargateService {
  const { container } = parts;
  const service = new ecsPatterns.ApplicationLoadBalancedFargateService(scope, 'Api', {
    cluster: parts.cluster,
    desiredCount: parts.desiredCount,
    // Archive queries run in DuckDB inside the task.
    cpu: 1024,
    memoryLimitMiB: 2048,
    publicLoadBalancer: true,
    circuitBreaker: { rollback: true },
    ...(parts.certificate && {
      certificate: parts.certificate,
      protocol: elbv2.ApplicationProtocol.HTTPS,
      redirectHTTP: true,
      sslPolicy: elbv2.SslPolicy.RECOMMENDED_TLS,
    }),
    taskImageOptions: {
      image: container.image,
      containerName: container.name,
      containerPort: 8080,
      taskRole: parts.taskRole,
      entryPoint: container.entryPoint,
      command: container.command,
      environment: container.environment,
      secrets: parts.secrets,
      logDriver: container.logDriver,
    },
  });
  service.targetGroup.configureHealthCheck({ path: '/health', healthyHttpCodes: '200', interval: Duration.seconds(15) });
  // Requests are short; do not hold deploys for the default five minutes.
  service.targetGroup.setAttribute('deregistration_delay.timeout_seconds', '30');
  return service;
}

function backgroundService(
  scope: Construct,
  id: string,
  parts: ServiceParts & {
    size: { cpu: number; memoryLimitMiB: number };
    stopTimeout?: Duration;
    minHealthyPercent?: number;
    maxHealthyPercent?: number;
    secrets?: Record<string, ecs.Secret>;
  },
): ecs.FargateService {
  const { container } = parts;
  const taskDefinition = new ecs.FargateTaskDefinition(scope, `${id}Task`, { ...parts.size, taskRole: parts.taskRole });
  taskDefinition.addContainer(container.name, {
    image: container.image,
    entryPoint: container.entryPoint,
    command: container.command,
    environment: container.environment,
    logging: container.logDriver,
    ...(parts.secrets && { secrets: parts.secrets }),
    ...(parts.stopTimeout && { stopTimeout: parts.stopTimeout }),
  });
  return new ecs.FargateService(scope, id, {
    cluster: parts.cluster,
    taskDefinition,
    desiredCount: parts.desiredCount,
    circuitBreaker: { rollback: true },
    ...(parts.minHealthyPercent !== undefined && { minHealthyPercent: parts.minHealthyPercent }),
    ...(parts.maxHealthyPercent !== undefined && { maxHealthyPercent: parts.maxHealthyPercent }),
  });
}

// --- Athena ---

/** DuckDB column types of the parts, as Glue/Hive types. */
const HIVE_TYPES: Record<string, string> = {
  VARCHAR: 'string',
  JSON: 'string',
  TIMESTAMPTZ: 'timestamp',
  DOUBLE: 'double',
  BIGINT: 'bigint',
};

/** Glue columns read from the DDL the worker writes parts with, so the two cannot drift. */
export function glueColumns(ddl: string): glue.CfnTable.ColumnProperty[] {
  return [...ddl.matchAll(/^\s*(\w+) (\w+)/gm)].map(([, name, type]) => {
    const hiveType = HIVE_TYPES[type ?? ''];
    if (!hiveType) throw new Error(`no Glue type for archive column ${name} ${type}`);
    return { name: name!, type: hiveType };
  });
}

function athenaTable(scope: Construct, opts: { bucket: s3.IBucket; databaseName: string; years: [number, number] }): void {
  const database = new glue.CfnDatabase(scope, 'GlueDatabase', {
    catalogId: Aws.ACCOUNT_ID,
    databaseInput: { name: opts.databaseName, description: 'Flood report archive (Parquet on S3)' },
  });
  const location = `s3://${opts.bucket.bucketName}/${REPORTS_PREFIX}`;
  // Partition projection: Athena computes the hour folders from the query's filter, so new
  // hours are queryable at once, with no crawler and no MSCK REPAIR.
  const twoDigits = (range: string) => ({ type: 'integer', range, digits: '2' });
  const projection = {
    year: { type: 'integer', range: opts.years.join(',') },
    month: twoDigits('1,12'),
    day: twoDigits('1,31'),
    // 00..23, and "all" for a compacted day: filter on created_at, not on hour.
    hour: { type: 'enum', values: [...Array.from({ length: 24 }, (_, h) => String(h).padStart(2, '0')), WHOLE_DAY].join(',') },
  };
  const parameters: Record<string, string> = {
    classification: 'parquet',
    EXTERNAL: 'TRUE',
    'projection.enabled': 'true',
    'storage.location.template': `${location}year=\${year}/month=\${month}/day=\${day}/hour=\${hour}`,
  };
  for (const [key, settings] of Object.entries(projection)) {
    for (const [name, value] of Object.entries(settings)) parameters[`projection.${key}.${name}`] = value;
  }
  const table = new glue.CfnTable(scope, 'ReportsTable', {
    catalogId: Aws.ACCOUNT_ID,
    databaseName: opts.databaseName,
    tableInput: {
      name: 'reports',
      description: 'One row per archived report; partitions are UTC hours of created_at (hour=all: a compacted day)',
      tableType: 'EXTERNAL_TABLE',
      parameters,
      partitionKeys: Object.keys(projection).map((name) => ({ name, type: 'string' })),
      storageDescriptor: {
        location,
        columns: glueColumns(ARCHIVE_TABLE_DDL),
        inputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat',
        outputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat',
        serdeInfo: { serializationLibrary: 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe' },
      },
    },
  });
  table.addResourceDependency(database);
}

function pascal(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}
