// The SNS topic of archived reports in the stack: TLS only, published to by the worker alone
// (told its ARN), named in the outputs; a subscriber's filter on `city` is what the worker sets.
// The event log in the bucket: the API reads it and appends retractions; the worker keeps it.
import { App, type CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { FloodArchiveStack } from '../../infra/floodArchiveStack.js';

let stack: FloodArchiveStack;
let template: Template;
let resources: Record<string, any>;

beforeAll(() => {
  stack = new FloodArchiveStack(new App(), 'Test', { imageRepositoryName: 'flood-archive', imageTag: 'abc123', allowPlainHttp: true });
  template = Template.fromStack(stack);
  resources = template.toJSON().Resources;
});

const logicalId = (c: IConstruct): string => stack.getLogicalId(c.node.defaultChild as CfnElement);

/** Every (role, action, resource) that names the reports topic. */
function publishers(): { role: string; actions: string[] }[] {
  const topic = { Ref: logicalId(stack.reportsTopic) };
  const out: { role: string; actions: string[] }[] = [];
  for (const policy of Object.values(resources).filter((r: any) => r.Type === 'AWS::IAM::Policy') as any[]) {
    for (const statement of policy.Properties.PolicyDocument.Statement) {
      const targets = [statement.Resource].flat();
      if (!targets.some((t: unknown) => JSON.stringify(t) === JSON.stringify(topic))) continue;
      for (const role of policy.Properties.Roles) out.push({ role: role.Ref, actions: [statement.Action].flat() });
    }
  }
  return out;
}

describe('reports topic', () => {
  it('exists beside the alarm topic and refuses plain HTTP publishers', () => {
    expect(resources[logicalId(stack.reportsTopic)]).toMatchObject({ Type: 'AWS::SNS::Topic', Properties: { DisplayName: 'Archived flood reports' } });
    const policies = Object.values(resources).filter((r: any) => r.Type === 'AWS::SNS::TopicPolicy') as any[];
    const own = policies.find((p) => p.Properties.Topics.some((t: any) => t.Ref === logicalId(stack.reportsTopic)));
    expect(own.Properties.PolicyDocument.Statement).toContainEqual(
      expect.objectContaining({ Effect: 'Deny', Action: 'sns:Publish', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
  });

  it('is published to by the worker role only, and only with sns:Publish', () => {
    expect(publishers()).toEqual([{ role: logicalId(stack.taskRoles.worker), actions: ['sns:Publish'] }]);
  });

  it('is given to the worker container as SNS_TOPIC_ARN, to no other process, and is an output', () => {
    const defs = Object.values(resources).filter((r: any) => r.Type === 'AWS::ECS::TaskDefinition') as any[];
    const withTopic = defs.flatMap((d) => d.Properties.ContainerDefinitions).filter((c: any) => c.Environment.some((e: any) => e.Name === 'SNS_TOPIC_ARN'));
    expect(withTopic.map((c: any) => c.Name)).toEqual(['worker']);
    expect(withTopic[0].Environment).toContainEqual({ Name: 'SNS_TOPIC_ARN', Value: { Ref: logicalId(stack.reportsTopic) } });
    expect(template.toJSON().Outputs.ReportsTopicArn.Value).toEqual({ Ref: logicalId(stack.reportsTopic) });
  });
});

/** The S3 actions each role is granted on keys under the events/ prefix, by resource. */
function eventGrants(): Record<string, Record<string, string[]>> {
  const byRole = Object.fromEntries(Object.entries(stack.taskRoles).map(([name, role]) => [logicalId(role), name]));
  const out: Record<string, Record<string, string[]>> = {};
  for (const policy of Object.values(resources).filter((r: any) => r.Type === 'AWS::IAM::Policy') as any[]) {
    for (const statement of policy.Properties.PolicyDocument.Statement) {
      for (const target of [statement.Resource].flat()) {
        const suffix = /"(\/events\/[^"]*)"/.exec(JSON.stringify(target))?.[1];
        if (!suffix) continue;
        for (const role of policy.Properties.Roles) {
          const name = byRole[role.Ref] ?? role.Ref;
          out[name] ??= {};
          out[name][suffix] = [...(out[name][suffix] ?? []), ...[statement.Action].flat()].sort();
        }
      }
    }
  }
  return out;
}

describe('event log permissions', () => {
  it('let the API read and append to the event log, mark retracted reports and claim their announcements only, and the worker and ops tasks keep events/', () => {
    const grants = eventGrants();
    expect(grants.api).toEqual({
      '/events/v1/log/*': ['s3:GetObject', 's3:PutObject'],
      '/events/v1/retracted/*': ['s3:GetObject', 's3:PutObject'],
      '/events/v1/announcing/*': ['s3:GetObject', 's3:PutObject'],
    });
    expect(grants.worker).toEqual({ '/events/*': ['s3:DeleteObject', 's3:GetObject', 's3:PutObject'] });
    expect(grants.scheduler).toEqual({ '/events/*': ['s3:DeleteObject', 's3:GetObject', 's3:PutObject'] });
  });
});
