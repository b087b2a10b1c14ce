// The synthesized CloudFormation of the FloodArchive stack: every resource the
// service relies on, with the values it relies on, and the IAM boundaries
// between its three processes.
import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { App, type CfnElement } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { defineApp } from '../../infra/app.js';
import { FloodArchiveStack, glueColumns, METRICS_PORT } from '../../infra/floodArchiveStack.js';
import { QUEUE_SETTINGS } from '../../src/queue/settings.js';

// Not the default (30), so a formula that ignored the setting would show.
const FLUSH = 45;
const CERTIFICATE_ARN = 'arn:aws:acm:ap-southeast-1:123456789012:certificate/abc';

let app: App;
let stack: FloodArchiveStack;
let template: Template;
let resources: Record<string, any>;

beforeAll(() => {
  app = new App();
  stack = new FloodArchiveStack(app, 'Test', {
    imageRepositoryName: 'flood-archive',
    imageTag: 'abc123',
    flushIntervalSeconds: FLUSH,
    certificateArn: CERTIFICATE_ARN,
  });
  template = Template.fromStack(stack);
  resources = template.toJSON().Resources;
});

const logicalId = (c: IConstruct): string => stack.getLogicalId(c.node.defaultChild as CfnElement);
const propertiesOf = (c: IConstruct): any => resources[logicalId(c)].Properties;
const ofType = (type: string): any[] => Object.values(resources).filter((r) => r.Type === type);

describe('archive bucket', () => {
  it('is versioned, encrypted, private, and kept when the stack goes', () => {
    const bucket = resources[logicalId(stack.bucket)];
    expect(bucket.DeletionPolicy).toBe('Retain');
    expect(bucket.UpdateReplacePolicy).toBe('Retain');
    expect(bucket.Properties.VersioningConfiguration).toEqual({ Status: 'Enabled' });
    expect(bucket.Properties.BucketEncryption.ServerSideEncryptionConfiguration).toEqual([
      { ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } },
    ]);
    expect(bucket.Properties.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
  });

  it('grants public reads of releases/ alone, and only where the deployment opts in', () => {
    const statements = (t: Template) => Object.values(t.toJSON().Resources as Record<string, any>).filter((r) => r.Type === 'AWS::S3::BucketPolicy').flatMap((r) => r.Properties.PolicyDocument.Statement);
    expect(statements(template).filter((st: any) => st.Effect === 'Allow' && JSON.stringify(st.Principal).includes('*'))).toEqual([]);
    const open = new FloodArchiveStack(new App(), 'Open', { imageRepositoryName: 'flood-archive', imageTag: 'abc123', certificateArn: CERTIFICATE_ARN, publicReleases: true });
    const openTemplate = Template.fromStack(open);
    const granted = statements(openTemplate).filter((st: any) => st.Effect === 'Allow' && JSON.stringify(st.Principal).includes('*'));
    expect(granted).toHaveLength(1);
    expect(granted[0]).toMatchObject({ Sid: 'PublicReleases', Action: 's3:GetObject', Principal: { AWS: '*' } });
    expect(JSON.stringify(granted[0].Resource)).toContain('/releases/*');
    const bucket = Object.values(openTemplate.toJSON().Resources as Record<string, any>).find((r) => r.Type === 'AWS::S3::Bucket')!;
    expect(bucket.Properties.PublicAccessBlockConfiguration).toEqual({ BlockPublicAcls: true, BlockPublicPolicy: false, IgnorePublicAcls: true, RestrictPublicBuckets: false });
  });

  it('refuses requests without TLS', () => {
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      Bucket: { Ref: logicalId(stack.bucket) },
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Deny',
            Action: 's3:*',
            Principal: { AWS: '*' },
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        ]),
      },
    });
  });

  it('expires old versions: pending markers after a day, everything else after 30 days', () => {
    expect(propertiesOf(stack.bucket).LifecycleConfiguration.Rules).toEqual([
      {
        Id: 'pending-markers',
        Prefix: 'ingest/pending/',
        NoncurrentVersionExpiration: { NoncurrentDays: 1 },
        ExpiredObjectDeleteMarker: true,
        Status: 'Enabled',
      },
      {
        Id: 'noncurrent-versions',
        NoncurrentVersionExpiration: { NoncurrentDays: 30 },
        AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 },
        Status: 'Enabled',
      },
    ]);
  });
});

describe('queues', () => {
  it('the report queue has the settings of the service bootstrap', () => {
    // The literal values pin QUEUE_SETTINGS too: a change there must be a deliberate one.
    expect(QUEUE_SETTINGS.maxReceiveCount).toBe(5);
    expect(QUEUE_SETTINGS.retentionSeconds).toBe(1_209_600);
    expect(QUEUE_SETTINGS.visibilityTimeoutSeconds(FLUSH)).toBe(2 * FLUSH + 30);
    expect(propertiesOf(stack.queue)).toEqual({
      QueueName: 'flood-reports',
      VisibilityTimeout: 2 * FLUSH + 30,
      MessageRetentionPeriod: 1_209_600,
      RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [logicalId(stack.deadLetterQueue), 'Arn'] }, maxReceiveCount: 5 },
      SqsManagedSseEnabled: true,
    });
  });

  it('the dead-letter queue is named after it, keeps messages 14 days, and is encrypted', () => {
    expect(propertiesOf(stack.deadLetterQueue)).toEqual({
      QueueName: 'flood-reports-dlq',
      MessageRetentionPeriod: 1_209_600,
      SqsManagedSseEnabled: true,
    });
  });

  it('both refuse requests without TLS', () => {
    for (const queue of [stack.queue, stack.deadLetterQueue]) {
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: logicalId(queue) }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
    }
  });

  it('the report queue takes messages from the three processes alone, an admin of the account refused (a worker trusts a first delivery)', () => {
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      Queues: [{ Ref: logicalId(stack.queue) }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          {
            Sid: 'OnlyTheServiceSends',
            Effect: 'Deny',
            Principal: { AWS: '*' },
            Action: 'sqs:SendMessage',
            Resource: { 'Fn::GetAtt': [logicalId(stack.queue), 'Arn'] },
            Condition: { ArnNotEquals: { 'aws:PrincipalArn': ['api', 'worker', 'scheduler'].map((name) => ({ 'Fn::GetAtt': [logicalId(stack.taskRoles[name as keyof typeof stack.taskRoles]), 'Arn'] })) } },
          },
        ]),
      },
    });
  });
});

describe('IAM: one least-privilege role per process', () => {
  /** A role's inline grants as sorted "action resource" lines, tokens named ("s3:PutObject bucket/reports/*"). */
  function grants(role: IConstruct): string[] {
    const names: Record<string, string> = {
      [logicalId(stack.bucket)]: 'bucket',
      [logicalId(stack.queue)]: 'queue',
      [logicalId(stack.deadLetterQueue)]: 'dlq',
      [logicalId(stack.reportsTopic)]: 'topic',
    };
    const name = (value: any): string => {
      if (typeof value === 'string') return value;
      if (value.Ref && names[value.Ref]) return names[value.Ref]!;
      if (value['Fn::GetAtt']?.[1] === 'Arn') return names[value['Fn::GetAtt'][0]] ?? JSON.stringify(value);
      if (value['Fn::Join']) return value['Fn::Join'][1].map(name).join(value['Fn::Join'][0]);
      return JSON.stringify(value);
    };
    const lines: string[] = [];
    for (const policy of ofType('AWS::IAM::Policy')) {
      if (!policy.Properties.Roles.some((r: unknown) => isDeepStrictEqual(r, { Ref: logicalId(role) }))) continue;
      for (const statement of policy.Properties.PolicyDocument.Statement) {
        expect(statement.Effect).toBe('Allow');
        expect(statement.Condition).toBeUndefined();
        for (const action of [statement.Action].flat()) {
          for (const resource of [statement.Resource].flat()) lines.push(`${action} ${name(resource)}`);
        }
      }
    }
    return lines.sort();
  }

  /** Whether any grant of the role matches (IAM wildcards included) the action on the resource. */
  function allows(role: IConstruct, action: string, resource: string): boolean {
    const glob = (pattern: string) =>
      new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 'i');
    return grants(role).some((line) => {
      const [grantedAction, grantedResource] = line.split(' ') as [string, string];
      return glob(grantedAction).test(action) && glob(grantedResource).test(resource);
    });
  }

  const part = 'bucket/reports/v1/year=2026/month=11/day=21/hour=13/part-01JD0000000000000000000000.parquet';
  const marker = 'bucket/ingest/pending/partner/1.json';

  it('the roles carry only their inline policy: no managed policies', () => {
    for (const role of Object.values(stack.taskRoles)) {
      expect(propertiesOf(role).ManagedPolicyArns).toBeUndefined();
      expect(propertiesOf(role).Policies).toBeUndefined();
      expect(propertiesOf(role).AssumeRolePolicyDocument.Statement).toEqual([
        { Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'ecs-tasks.amazonaws.com' } },
      ]);
    }
  });

  it('API: reads, and writes only what accepting and retracting reports write under ingest/; sends to the queue', () => {
    expect(grants(stack.taskRoles.api)).toEqual(
      [
        's3:ListBucket bucket',
        's3:GetObject bucket/ingest/*',
        's3:GetObject bucket/reports/*',
        's3:GetObject bucket/ready/*',
        's3:GetObject bucket/stats/*',
        's3:GetObject bucket/cities/*',
        's3:GetObject bucket/releases/*',
        's3:GetObject bucket/changes/*',
        's3:PutObject bucket/ingest/pending/*',
        's3:PutObject bucket/ingest/keys/*',
        's3:PutObject bucket/ingest/retractions/*',
        's3:PutObject bucket/ingest/unpurged/*',
        's3:PutObject bucket/ingest/probe/ready',
        's3:DeleteObject bucket/ingest/pending/*',
        's3:GetObject bucket/secrets/cursor-key',
        's3:PutObject bucket/secrets/cursor-key',
        's3:GetObject bucket/events/v1/log/*',
        's3:PutObject bucket/events/v1/log/*',
        's3:GetObject bucket/events/v1/retracted/*',
        's3:PutObject bucket/events/v1/retracted/*',
        's3:GetObject bucket/events/v1/announcing/*',
        's3:PutObject bucket/events/v1/announcing/*',
        'sqs:SendMessage queue',
        'sqs:GetQueueAttributes queue',
      ].sort(),
    );
    const api = stack.taskRoles.api;
    expect(allows(api, 's3:PutObject', marker)).toBe(true);
    expect(allows(api, 's3:PutObject', 'bucket/ingest/keys/partner/1.json')).toBe(true);
    expect(allows(api, 's3:PutObject', 'bucket/ingest/retractions/001763730300000-partner-1.json')).toBe(true);
    // Partner keys: read to authenticate, written only by ops (`flood-archive keys`, the scheduler's role).
    expect(allows(api, 's3:GetObject', `bucket/ingest/api-keys/${'a'.repeat(64)}.json`)).toBe(true);
    expect(allows(api, 's3:PutObject', `bucket/ingest/api-keys/${'a'.repeat(64)}.json`)).toBe(false);
    expect(allows(stack.taskRoles.scheduler, 's3:PutObject', `bucket/ingest/api-keys/${'a'.repeat(64)}.json`)).toBe(true);
    expect(allows(api, 's3:GetObject', part)).toBe(true);
    expect(allows(api, 's3:DeleteObject', part)).toBe(false);
    // Its own marker, when another post of the report won between its reads and its writes.
    expect(allows(api, 's3:DeleteObject', marker)).toBe(true);
    expect(allows(api, 's3:DeleteObject', 'bucket/ingest/keys/partner/1.json')).toBe(false);
    expect(allows(api, 's3:PutObject', part)).toBe(false);
    expect(allows(api, 's3:PutObject', 'bucket/cities/current.json')).toBe(false);
    expect(allows(api, 'sqs:ReceiveMessage', 'queue')).toBe(false);
    // It appends a partner's retraction to the event log, and reads the log (stream, CAP); the
    // subscriptions (with their secrets) and the delivery state stay out of its reach.
    expect(allows(api, 's3:PutObject', 'bucket/events/v1/log/0001.json')).toBe(true);
    expect(allows(api, 's3:DeleteObject', 'bucket/events/v1/log/0001.json')).toBe(false);
    expect(allows(api, 's3:GetObject', 'bucket/events/v1/subscriptions/x.json')).toBe(false);
    // An updated_after sync reads the change logs and their retention record; it writes neither.
    expect(allows(api, 's3:GetObject', 'bucket/changes/v1/001763856000000-01KAB.json')).toBe(true);
    expect(allows(api, 's3:GetObject', 'bucket/changes/retention.json')).toBe(true);
    expect(allows(api, 's3:PutObject', 'bucket/changes/v1/001763856000000-01KAB.json')).toBe(false);
    // It serves the releases; it never writes one.
    expect(allows(api, 's3:GetObject', 'bucket/releases/2025-r1/reports-2025-06.parquet')).toBe(true);
    expect(allows(api, 's3:PutObject', 'bucket/releases/2025-r1/reports-2025-06.parquet')).toBe(false);
  });

  it('worker: appends parts, clears markers, rebuilds missing keys, consumes the queue; cannot publish boundaries', () => {
    expect(grants(stack.taskRoles.worker)).toEqual(
      [
        's3:ListBucket bucket',
        's3:GetObject bucket/ingest/*',
        's3:DeleteObject bucket/ingest/pending/*',
        's3:GetObject bucket/cities/*',
        's3:PutObject bucket/reports/*',
        's3:PutObject bucket/ready/*',
        's3:PutObject bucket/stats/*',
        's3:DeleteObject bucket/ready/*',
        's3:DeleteObject bucket/stats/*',
        's3:PutObject bucket/dead-letter/*',
        's3:PutObject bucket/changes/*',
        's3:PutObject bucket/ingest/pending/*',
        's3:PutObject bucket/ingest/keys/*',
        's3:GetObject bucket/jobs/runs/reconcile-timer/*',
        's3:PutObject bucket/jobs/runs/reconcile-timer/*',
        's3:DeleteObject bucket/jobs/runs/reconcile-timer/*',
        's3:GetObject bucket/events/*',
        's3:PutObject bucket/events/*',
        's3:DeleteObject bucket/events/*',
        'sqs:ReceiveMessage queue',
        'sqs:DeleteMessage queue',
        'sqs:ChangeMessageVisibility queue',
        'sqs:GetQueueAttributes queue',
        'sqs:SendMessage queue',
        'sns:Publish topic',
      ].sort(),
    );
    const worker = stack.taskRoles.worker;
    expect(allows(worker, 's3:PutObject', part)).toBe(true);
    // A part's ready texts are written with it, and read by the API.
    expect(allows(worker, 's3:PutObject', part.replace('/reports/', '/ready/'))).toBe(true);
    expect(allows(stack.taskRoles.api, 's3:GetObject', part.replace('/reports/', '/ready/'))).toBe(true);
    // And its stats sidecar.
    expect(allows(worker, 's3:PutObject', part.replace('/reports/', '/stats/'))).toBe(true);
    expect(allows(stack.taskRoles.api, 's3:GetObject', part.replace('/reports/', '/stats/'))).toBe(true);
    expect(allows(worker, 's3:DeleteObject', marker)).toBe(true);
    expect(allows(worker, 's3:PutObject', marker)).toBe(true);
    // Reconciliation creates a key the API never got to write; deleting one stays out of reach.
    expect(allows(worker, 's3:PutObject', 'bucket/ingest/keys/partner/1.json')).toBe(true);
    expect(allows(worker, 's3:DeleteObject', 'bucket/ingest/keys/partner/1.json')).toBe(false);
    expect(allows(worker, 's3:PutObject', 'bucket/cities/current.json')).toBe(false);
    expect(allows(worker, 's3:PutObject', 'bucket/cities/versions/abc.json')).toBe(false);
    expect(allows(worker, 's3:DeleteObject', part)).toBe(false);
    // A sidecar it could not build goes, rather than the part's publish failing.
    expect(allows(worker, 's3:DeleteObject', part.replace('/reports/', '/ready/'))).toBe(true);
    expect(allows(worker, 's3:DeleteObject', part.replace('/reports/', '/stats/'))).toBe(true);
    expect(allows(worker, 'sqs:ReceiveMessage', 'dlq')).toBe(false);
    // Its reconciliation timer takes turns with the other workers' (src/ingest/reconciler.ts), and touches no other job's objects.
    expect(allows(worker, 's3:PutObject', 'bucket/jobs/runs/reconcile-timer/20261201T094000000Z.json')).toBe(true);
    expect(allows(worker, 's3:DeleteObject', 'bucket/jobs/runs/reconcile-timer/20261201T094000000Z.json')).toBe(true);
    expect(allows(worker, 's3:PutObject', 'bucket/jobs/locks/compaction.json')).toBe(false);
    // Each flush logs what it wrote; pruning the logs is the scheduler's.
    expect(allows(worker, 's3:PutObject', 'bucket/changes/v1/001763856000000-01KAB.json')).toBe(true);
    expect(allows(worker, 's3:DeleteObject', 'bucket/changes/v1/001763856000000-01KAB.json')).toBe(false);
  });

  it('scheduler: read/write/delete on reports, ingest, cities, job leases and releases; redrives the dead-letter queue', () => {
    const objectGrants = ['reports', 'ready', 'stats', 'ingest', 'cities', 'jobs', 'events', 'changes', 'releases'].flatMap((prefix) =>
      ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'].map((action) => `${action} bucket/${prefix}/*`),
    );
    expect(grants(stack.taskRoles.scheduler)).toEqual(
      [
        's3:ListBucket bucket',
        ...objectGrants,
        'sqs:SendMessage queue',
        'sqs:GetQueueAttributes queue',
        'sqs:GetQueueUrl dlq',
        'sqs:ReceiveMessage dlq',
        'sqs:ChangeMessageVisibility dlq',
        'sqs:DeleteMessage dlq',
        'sqs:GetQueueAttributes dlq',
      ].sort(),
    );
    const scheduler = stack.taskRoles.scheduler;
    expect(allows(scheduler, 's3:PutObject', 'bucket/cities/current.json')).toBe(true);
    expect(allows(scheduler, 's3:DeleteObject', part)).toBe(true);
    expect(allows(scheduler, 's3:DeleteObject', part.replace('/reports/', '/stats/'))).toBe(true);
    expect(allows(scheduler, 's3:PutObject', 'bucket/jobs/compaction.lease')).toBe(true);
    expect(allows(scheduler, 'sqs:ReceiveMessage', 'queue')).toBe(false);
    expect(allows(scheduler, 's3:PutObject', 'bucket/dead-letter/x.json')).toBe(false);
    // The monthly release writes its files once, and removes a dead run's unpublished files (which
    // may hold reports retracted since): without the right, a period was never released again.
    expect(allows(scheduler, 's3:PutObject', 'bucket/releases/2025-06-r1/manifest.json')).toBe(true);
    expect(allows(scheduler, 's3:DeleteObject', 'bucket/releases/2025-06-r1/reports-2025-06.parquet')).toBe(true);
  });

  it('no role can delete the bucket or act on all of S3', () => {
    for (const role of Object.values(stack.taskRoles)) {
      expect(allows(role, 's3:DeleteBucket', 'bucket')).toBe(false);
      expect(grants(role).filter((line) => line.includes('*') && !/ bucket\/[a-z-]+(\/[a-z0-9-]+){0,2}\/\*$/.test(line))).toEqual([]);
    }
  });
});

describe('ECS: one image, three processes', () => {
  const containers = (): Record<string, { container: any; taskDefinition: any }> =>
    Object.fromEntries(
      ofType('AWS::ECS::TaskDefinition').flatMap((td) =>
        td.Properties.ContainerDefinitions.map((c: any) => [c.Name, { container: c, taskDefinition: td.Properties }]),
      ),
    );

  it('runs the API, the worker and the scheduler from the same ECR image and tag', () => {
    const all = containers();
    expect(Object.keys(all).sort()).toEqual(['api', 'scheduler', 'worker']);
    const commands = { api: 'serve', worker: 'worker', scheduler: 'scheduler' } as const;
    for (const [name, command] of Object.entries(commands)) {
      const { container } = all[name]!;
      expect(container.EntryPoint).toEqual(['node', 'dist/src/main/flood-archive.cjs']);
      expect(container.Command).toEqual([command]);
      expect(container.Image['Fn::Join'][1].at(-1)).toBe('/flood-archive:abc123');
    }
    expect(ofType('AWS::ECS::Service')).toHaveLength(3);
  });

  it('gives every process the storage, queue, region and flush interval, the API one proxy hop to trust, and the API and scheduler (its releases cite it) the public address', () => {
    const common = [
      { Name: 'STORAGE_URL', Value: { 'Fn::Join': ['', ['s3://', { Ref: logicalId(stack.bucket) }, '/']] } },
      { Name: 'QUEUE_URL', Value: { Ref: logicalId(stack.queue) } },
      { Name: 'AWS_REGION', Value: { Ref: 'AWS::Region' } },
      { Name: 'FLUSH_INTERVAL_SECONDS', Value: String(FLUSH) },
    ];
    // Links in answers and releases are built on the load balancer's name, never on a request's Host.
    const publicBaseUrl = { Name: 'PUBLIC_BASE_URL', Value: { 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [logicalId(stack.api.loadBalancer), 'DNSName'] }]] } };
    for (const [name, { container }] of Object.entries(containers())) {
      const own: Record<string, unknown[]> = {
        api: [
          { Name: 'TRUST_PROXY', Value: '1' },
          { Name: 'HTTP_KEEP_ALIVE_TIMEOUT_SECONDS', Value: '65' },
          { Name: 'METRICS_PORT', Value: '9464' },
          publicBaseUrl,
        ],
        worker: [{ Name: 'SNS_TOPIC_ARN', Value: { Ref: logicalId(stack.reportsTopic) } }],
        scheduler: [publicBaseUrl],
      };
      expect(container.Environment).toEqual([...common, ...(own[name] ?? [])]);
    }
  });

  it('gives API_KEYS, from Secrets Manager, to the API and to the scheduler (whose task definition runs ops commands such as keys), never to the worker', () => {
    const all = containers();
    expect(all.api!.container.Secrets).toEqual([{ Name: 'API_KEYS', ValueFrom: { Ref: logicalId(stack.apiKeys) } }]);
    expect(all.scheduler!.container.Secrets).toEqual([{ Name: 'API_KEYS', ValueFrom: { Ref: logicalId(stack.apiKeys) } }]);
    expect(all.worker!.container.Secrets).toBeUndefined();
    expect(resources[logicalId(stack.apiKeys)].DeletionPolicy).toBe('Retain');
  });

  it('runs each process with its own task role', () => {
    const all = containers();
    for (const [name, role] of Object.entries(stack.taskRoles)) {
      expect(all[name]!.taskDefinition.TaskRoleArn).toEqual({ 'Fn::GetAtt': [logicalId(role), 'Arn'] });
    }
  });

  it('serves the API on 8080 behind a public load balancer that checks /health', () => {
    expect(containers().api!.container.PortMappings).toEqual([{ ContainerPort: 8080, Protocol: 'tcp' }]);
    template.hasResourceProperties('AWS::ElasticLoadBalancingV2::LoadBalancer', { Scheme: 'internet-facing', Type: 'application' });
    template.hasResourceProperties('AWS::ElasticLoadBalancingV2::TargetGroup', {
      HealthCheckPath: '/health',
      Matcher: { HttpCode: '200' },
      TargetType: 'ip',
    });
    expect(propertiesOf(stack.api.service).LoadBalancers).toEqual([
      { ContainerName: 'api', ContainerPort: 8080, TargetGroupArn: { Ref: logicalId(stack.api.targetGroup) } },
    ]);
  });

  it('keeps the metrics port (partner names and volumes) out of the load balancer\'s reach', () => {
    // One target group, whose targets are the API containers' port 8080.
    template.resourceCountIs('AWS::ElasticLoadBalancingV2::TargetGroup', 1);
    expect(propertiesOf(stack.api.service).LoadBalancers.map((l: any) => l.ContainerPort)).toEqual([8080]);
    for (const listener of ofType('AWS::ElasticLoadBalancingV2::Listener')) {
      for (const action of listener.Properties.DefaultActions) {
        if (action.Type === 'forward') expect(action.TargetGroupArn).toEqual({ Ref: logicalId(stack.api.targetGroup) });
        else expect(action.Type).toBe('redirect');
      }
    }
    template.resourceCountIs('AWS::ElasticLoadBalancingV2::ListenerRule', 0);
    // The API tasks admit the load balancer on 8080 only, and nothing else at all.
    const serviceGroups = propertiesOf(stack.api.service).NetworkConfiguration.AwsvpcConfiguration.SecurityGroups;
    const ingress = ofType('AWS::EC2::SecurityGroupIngress').filter((i) =>
      serviceGroups.some((g: unknown) => isDeepStrictEqual(g, i.Properties.GroupId)),
    );
    expect(ingress.map((i) => [i.Properties.FromPort, i.Properties.ToPort])).toEqual([[8080, 8080]]);
    for (const group of ofType('AWS::EC2::SecurityGroup')) {
      for (const rule of group.Properties.SecurityGroupIngress ?? []) expect([rule.FromPort, rule.ToPort]).not.toContain(METRICS_PORT);
    }
    expect(containers().api!.container.PortMappings.map((m: any) => m.ContainerPort)).toEqual([8080]);
  });

  it('runs exactly one scheduler, also during deployments', () => {
    const scheduler = propertiesOf(stack.scheduler);
    expect(scheduler.DesiredCount).toBe(1);
    expect(scheduler.DeploymentConfiguration).toMatchObject({ MaximumPercent: 100, MinimumHealthyPercent: 0 });
  });

  it('starts the scheduler, the only process that may seed cities/, before the others', () => {
    const schedulerId = logicalId(stack.scheduler);
    expect(resources[logicalId(stack.api.service)].DependsOn).toContain(schedulerId);
    expect(resources[logicalId(stack.worker)].DependsOn).toContain(schedulerId);
    expect(resources[schedulerId].DependsOn ?? []).not.toContain(logicalId(stack.api.service));
  });

  it('lets the worker flush its buffer on stop, and the scheduler end its runs (100 s) and give their leases back', () => {
    expect(containers().worker!.container.StopTimeout).toBe(120);
    expect(containers().scheduler!.container.StopTimeout).toBe(120);
  });

  it('places the tasks in a new two-AZ VPC with one NAT gateway and an S3 endpoint', () => {
    template.resourceCountIs('AWS::EC2::VPC', 1);
    template.resourceCountIs('AWS::EC2::NatGateway', 1);
    const azs = ofType('AWS::EC2::Subnet').map((s) => JSON.stringify(s.Properties.AvailabilityZone));
    expect(azs).toHaveLength(4);
    expect(new Set(azs).size).toBe(2);
    template.hasResourceProperties('AWS::EC2::VPCEndpoint', {
      VpcEndpointType: 'Gateway',
      ServiceName: Match.objectLike({ 'Fn::Join': ['', Match.arrayWith(['com.amazonaws.', '.s3'])] }),
    });
    for (const service of ofType('AWS::ECS::Service')) {
      expect(service.Properties.NetworkConfiguration.AwsvpcConfiguration.AssignPublicIp).toBe('DISABLED');
    }
  });
});

describe('alarms', () => {
  const alarm = (id: string): any => {
    const found = Object.entries(resources).filter(([key, r]) => r.Type === 'AWS::CloudWatch::Alarm' && key.startsWith(id));
    expect(found).toHaveLength(1);
    return found[0]![1].Properties;
  };

  it('raises one alarm per failure mode, each notifying the alarm topic', () => {
    const topics = Object.keys(template.findResources('AWS::SNS::Topic')).filter((id) => id !== logicalId(stack.reportsTopic));
    expect(topics).toHaveLength(1);
    expect(ofType('AWS::CloudWatch::Alarm')).toHaveLength(3);
    for (const a of ofType('AWS::CloudWatch::Alarm')) expect(a.Properties.AlarmActions).toEqual([{ Ref: topics[0] }]);
  });

  it('as soon as the dead-letter queue holds a message', () => {
    expect(alarm('DeadLetterQueueNotEmpty')).toMatchObject({
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(stack.deadLetterQueue), 'QueueName'] } }],
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 0,
      EvaluationPeriods: 1,
    });
  });

  it('when the oldest queued report is older than ten flush intervals', () => {
    expect(alarm('OldestMessageAge')).toMatchObject({
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateAgeOfOldestMessage',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(stack.queue), 'QueueName'] } }],
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 10 * FLUSH,
    });
  });

  it('when more than 5% of API requests end in a target 5xx', () => {
    const props = alarm('Api5xxRate');
    expect(props).toMatchObject({ ComparisonOperator: 'GreaterThanThreshold', Threshold: 5, EvaluationPeriods: 5, DatapointsToAlarm: 3 });
    const byId = Object.fromEntries(props.Metrics.map((m: any) => [m.Id, m]));
    expect(byId.expr_1.Expression).toBe('IF(requests > 0, 100 * FILL(errors, 0) / requests, 0)');
    const lb = { Name: 'LoadBalancer', Value: { 'Fn::GetAtt': [logicalId(stack.api.loadBalancer), 'LoadBalancerFullName'] } };
    expect(byId.errors.MetricStat).toMatchObject({
      Metric: { Namespace: 'AWS/ApplicationELB', MetricName: 'HTTPCode_Target_5XX_Count', Dimensions: [lb] },
      Stat: 'Sum',
    });
    expect(byId.requests.MetricStat).toMatchObject({
      Metric: { Namespace: 'AWS/ApplicationELB', MetricName: 'RequestCount', Dimensions: [lb] },
      Stat: 'Sum',
    });
  });
});

describe('Glue table for Athena', () => {
  const table = (): any => ofType('AWS::Glue::Table')[0].Properties;
  const location = (suffix: string) => ({ 'Fn::Join': ['', ['s3://', { Ref: logicalId(stack.bucket) }, `/reports/v1/${suffix}`]] });

  it('is an external Parquet table over reports/v1/ in its own database', () => {
    template.resourceCountIs('AWS::Glue::Table', 1);
    template.hasResourceProperties('AWS::Glue::Database', { DatabaseInput: { Name: 'flood_archive' } });
    const { DatabaseName, TableInput } = table();
    expect(DatabaseName).toBe('flood_archive');
    expect(TableInput.Name).toBe('reports');
    expect(TableInput.TableType).toBe('EXTERNAL_TABLE');
    expect(TableInput.StorageDescriptor).toMatchObject({
      Location: location(''),
      InputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat',
      OutputFormat: 'org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat',
      SerdeInfo: { SerializationLibrary: 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe' },
    });
  });

  it('has exactly the columns of the Parquet parts, in order', () => {
    expect(table().TableInput.StorageDescriptor.Columns).toEqual(
      [
        ['pkey', 'string'],
        ['created_at', 'timestamp'],
        ['source', 'string'],
        ['status', 'string'],
        ['url', 'string'],
        ['image_url', 'string'],
        ['disaster_type', 'string'],
        ['report_data', 'string'],
        ['instance_region_code', 'string'],
        ['local_area_id', 'string'],
        ['province_code', 'string'],
        ['region_code', 'string'],
        ['title', 'string'],
        ['text', 'string'],
        ['lng', 'double'],
        ['lat', 'double'],
        ['post_id', 'bigint'],
        ['partner_city', 'string'],
        ['received_at', 'timestamp'],
        ['boundary_version', 'string'],
        ['key_name', 'string'],
      ].map(([Name, Type]) => ({ Name, Type })),
    );
  });

  it('is partitioned by the zero-padded hour folders and compacted days, found by partition projection', () => {
    const { PartitionKeys, Parameters } = table().TableInput;
    expect(PartitionKeys).toEqual(['year', 'month', 'day', 'hour'].map((Name) => ({ Name, Type: 'string' })));
    expect(Parameters).toEqual({
      classification: 'parquet',
      EXTERNAL: 'TRUE',
      'projection.enabled': 'true',
      'projection.year.type': 'integer',
      'projection.year.range': '2010,2050',
      'projection.month.type': 'integer',
      'projection.month.range': '1,12',
      'projection.month.digits': '2',
      'projection.day.type': 'integer',
      'projection.day.range': '1,31',
      'projection.day.digits': '2',
      'projection.hour.type': 'enum',
      'projection.hour.values': '00,01,02,03,04,05,06,07,08,09,10,11,12,13,14,15,16,17,18,19,20,21,22,23,all',
      'storage.location.template': location('year=${year}/month=${month}/day=${day}/hour=${hour}'),
    });
  });

  it('refuses a part column it has no Athena type for', () => {
    expect(() => glueColumns('(\n  a VARCHAR,\n  b HUGEINT\n)')).toThrow(/b HUGEINT/);
  });
});

describe('outputs and synthesis', () => {
  it('outputs the bucket, the queues and the load balancer URL', () => {
    const outputs = template.findOutputs('*');
    expect(outputs.BucketName!.Value).toEqual({ Ref: logicalId(stack.bucket) });
    expect(outputs.QueueUrl!.Value).toEqual({ Ref: logicalId(stack.queue) });
    expect(outputs.DeadLetterQueueUrl!.Value).toEqual({ Ref: logicalId(stack.deadLetterQueue) });
    expect(outputs.LoadBalancerUrl!.Value).toEqual({
      'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [logicalId(stack.api.loadBalancer), 'DNSName'] }]],
    });
  });

  it('needs no Docker and copies no files: the only asset is the template', () => {
    const assembly = app.synth();
    const manifest = JSON.parse(fs.readFileSync(path.join(assembly.directory, 'Test.assets.json'), 'utf8'));
    expect(manifest.dockerImages).toEqual({});
    expect(Object.values(manifest.files).map((f: any) => f.source.path)).toEqual(['Test.template.json']);
  });

  it('serves HTTPS on 443 with the certificate, and port 80 only redirects to it', () => {
    const listeners = ofType('AWS::ElasticLoadBalancingV2::Listener').map((l) => l.Properties);
    expect(listeners.map((l) => `${l.Port} ${l.Protocol}`).sort()).toEqual(['443 HTTPS', '80 HTTP']);
    const https = listeners.find((l) => l.Port === 443);
    expect(https.Certificates).toEqual([{ CertificateArn: CERTIFICATE_ARN }]);
    expect(https.DefaultActions).toEqual([{ Type: 'forward', TargetGroupArn: { Ref: logicalId(stack.api.targetGroup) } }]);
    const http = listeners.find((l) => l.Port === 80);
    expect(http.DefaultActions).toEqual([
      { Type: 'redirect', RedirectConfig: { Protocol: 'HTTPS', Port: '443', StatusCode: 'HTTP_301' } },
    ]);
  });

  it('refuses to synthesise without a certificate, unless plain HTTP is asked for by name', () => {
    const props = { imageRepositoryName: 'flood-archive', imageTag: 'abc123' };
    expect(() => new FloodArchiveStack(new App(), 'NoTls', props)).toThrow(/certificateArn.*allowPlainHttp/s);
    expect(() => defineApp(new App())).toThrow(/certificateArn/);
    expect(() => defineApp(new App({ context: { allowPlainHttp: 'yes' } }))).toThrow(/allowPlainHttp/);

    const plain = Template.fromStack(new FloodArchiveStack(new App(), 'Plain', { ...props, allowPlainHttp: true }));
    const listeners = Object.values(plain.findResources('AWS::ElasticLoadBalancingV2::Listener')).map((l: any) => l.Properties);
    expect(listeners.map((l) => `${l.Port} ${l.Protocol}`)).toEqual(['80 HTTP']);
    expect(plain.findOutputs('LoadBalancerUrl').LoadBalancerUrl!.Value['Fn::Join'][1][0]).toBe('http://');
    const fromContext = defineApp(new App({ context: { allowPlainHttp: 'true' } })).node.findChild('FloodArchive') as FloodArchiveStack;
    expect(fromContext.api.listener.port).toBe(80);
  });

  it('the app reads its settings from context and rejects a bad flush interval', () => {
    const configured = defineApp(
      new App({ context: { imageTag: 'deadbeef', flushIntervalSeconds: '60', region: 'ap-southeast-1', certificateArn: CERTIFICATE_ARN } }),
    );
    const built = configured.node.findChild('FloodArchive') as FloodArchiveStack;
    expect(built.region).toBe('ap-southeast-1');
    const queue = Template.fromStack(built).toJSON().Resources[built.getLogicalId(built.queue.node.defaultChild as CfnElement)];
    expect(queue.Properties.VisibilityTimeout).toBe(150);
    expect(() => defineApp(new App({ context: { flushIntervalSeconds: 'soon', certificateArn: CERTIFICATE_ARN } }))).toThrow(/flushIntervalSeconds/);
  });

  it("the app takes Athena's years from context, as docs/aws.md says", () => {
    const built = defineApp(new App({ context: { certificateArn: CERTIFICATE_ARN, archiveYears: '1990-2060' } })).node.findChild('FloodArchive') as FloodArchiveStack;
    const tables = Object.values(Template.fromStack(built).toJSON().Resources as Record<string, any>).filter((r) => r.Type === 'AWS::Glue::Table');
    expect(tables.map((t) => t.Properties.TableInput.Parameters['projection.year.range'])).toEqual(['1990,2060']);
    for (const bad of ['1990', '2060-1990', '1969-2050', 'soon-2050']) {
      expect(() => defineApp(new App({ context: { certificateArn: CERTIFICATE_ARN, archiveYears: bad } })), bad).toThrow(/archiveYears/);
    }
  });

  it('the app takes the public address and public releases from context, as docs/aws.md says', () => {
    const built = defineApp(
      new App({ context: { certificateArn: CERTIFICATE_ARN, publicBaseUrl: 'https://floods.example.org/', publicReleases: 'true' } }),
    ).node.findChild('FloodArchive') as FloodArchiveStack;
    const resources = Object.values(Template.fromStack(built).toJSON().Resources as Record<string, any>);
    const env = resources.filter((r) => r.Type === 'AWS::ECS::TaskDefinition').flatMap((r) => r.Properties.ContainerDefinitions.flatMap((c: any) => c.Environment ?? []));
    expect(env.filter((e: any) => e.Name === 'PUBLIC_BASE_URL').map((e: any) => e.Value)).toContain('https://floods.example.org');
    const open = resources.filter((r) => r.Type === 'AWS::S3::BucketPolicy').flatMap((r) => r.Properties.PolicyDocument.Statement).filter((st: any) => st.Sid === 'PublicReleases');
    expect(open).toHaveLength(1);
    expect(() => defineApp(new App({ context: { certificateArn: CERTIFICATE_ARN, publicReleases: 'yes' } }))).toThrow(/publicReleases/);
    // The scheduler makes the releases, whose citations name their URL.
    const scheduler = resources.find((r) => r.Type === 'AWS::ECS::TaskDefinition' && r.Properties.ContainerDefinitions[0].Name === 'scheduler')!;
    expect(scheduler.Properties.ContainerDefinitions[0].Environment).toContainEqual({ Name: 'PUBLIC_BASE_URL', Value: 'https://floods.example.org' });
    // Refused as the service would refuse it as PUBLIC_BASE_URL (its tasks would exit 78 at every start).
    for (const bad of ['floods.example.org', 'https://floods_example.org', 'https://floods.example.org/?x=1']) {
      expect(() => defineApp(new App({ context: { certificateArn: CERTIFICATE_ARN, publicBaseUrl: bad } })), bad).toThrow(/publicBaseUrl/);
    }
  });
});
