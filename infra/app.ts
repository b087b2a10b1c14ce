// The CDK app: one FloodArchive stack, configured from context, e.g.
//   -c imageTag=<commit> -c imageRepository=flood-archive -c flushIntervalSeconds=30
//   -c certificateArn=arn:aws:acm:... -c account=123456789012 -c region=ap-southeast-1
//   -c publicBaseUrl=https://floods.example.org -c publicReleases=true -c archiveYears=2010-2050
// A certificate is required; -c allowPlainHttp=true serves plain HTTP instead (a trial only).
// Without account/region the template is environment-agnostic.
import { pathToFileURL } from 'node:url';
import { App } from 'aws-cdk-lib';
import { PUBLIC_BASE_URL_PATTERN } from '../src/shared/config.js';
import { FloodArchiveStack } from './floodArchiveStack.js';

/** Adds the stack to `app`, reading its settings from the app's context. */
export function defineApp(app: App): App {
  const context = (key: string): string | undefined => {
    const value: unknown = app.node.tryGetContext(key);
    return value === undefined || value === null || value === '' ? undefined : String(value);
  };
  const flushIntervalSeconds = Number(context('flushIntervalSeconds') ?? 30);
  if (!(flushIntervalSeconds > 0 && flushIntervalSeconds <= 3600)) {
    throw new Error(`context flushIntervalSeconds must be a number of seconds in (0, 3600], not ${context('flushIntervalSeconds')}`);
  }
  const account = context('account');
  const region = context('region');
  const certificateArn = context('certificateArn');
  const plain = context('allowPlainHttp') ?? 'false';
  if (plain !== 'true' && plain !== 'false') throw new Error(`context allowPlainHttp must be true or false, not ${plain}`);
  const publicReleases = context('publicReleases') ?? 'false';
  if (publicReleases !== 'true' && publicReleases !== 'false') throw new Error(`context publicReleases must be true or false, not ${publicReleases}`);
  // The address clients use (the certificate's name), for links in answers; else the load balancer's.
  const publicBaseUrl = context('publicBaseUrl');
  if (publicBaseUrl !== undefined && !new RegExp(PUBLIC_BASE_URL_PATTERN).test(publicBaseUrl)) throw new Error(`context publicBaseUrl must be an http(s) address without a query (as PUBLIC_BASE_URL), not ${publicBaseUrl}`);
  // Athena's years, e.g. 1990-2060 for a backfill of older reports.
  const years = context('archiveYears');
  const yearRange = years === undefined ? undefined : /^(\d{4})-(\d{4})$/.exec(years);
  const archiveYears = yearRange && ([Number(yearRange[1]), Number(yearRange[2])] as [number, number]);
  if (years !== undefined && !(archiveYears && archiveYears[0] >= 1970 && archiveYears[0] <= archiveYears[1])) {
    throw new Error(`context archiveYears must be FIRST-LAST years from 1970 on (e.g. 2010-2050), not ${years}`);
  }
  new FloodArchiveStack(app, 'FloodArchive', {
    description: 'Flood report archive: S3 Parquet archive, SQS intake queue, API/worker/scheduler on Fargate',
    ...((account || region) && { env: { account, region } }),
    imageRepositoryName: context('imageRepository') ?? 'flood-archive',
    // Deployments should pass the commit they built: ECS re-pulls only when the task definition changes.
    imageTag: context('imageTag') ?? 'latest',
    flushIntervalSeconds,
    ...(certificateArn && { certificateArn }),
    allowPlainHttp: plain === 'true',
    publicReleases: publicReleases === 'true',
    ...(publicBaseUrl && { publicBaseUrl: publicBaseUrl.replace(/\/+$/, '') }),
    ...(archiveYears && { archiveYears }),
  });
  return app;
}

// Run directly (the cdk CLI does), synthesize; imported (infra/synth.ts, tests), only define.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  defineApp(new App()).synth();
}
