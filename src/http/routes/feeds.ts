// The partners' routes: a report posted, and one taken back.
import { MAX_BODY_BYTES } from '../feedPost.js';
import { error, tooMany, unavailable } from '../openapiParts.js';
import type { Route } from '../route.js';
import { POST_ID_STRING_PATTERN } from '../../partners/partnerReport.js';

export const FEEDS_ROUTES: readonly Route[] = [
  {
    path: '/feeds/partner',
    serve: { post: 'postPartnerReport' },
    direct: true,
    doc: () => ({
      '/feeds/partner': {
        post: {
          operationId: 'postPartnerReport',
          summary: 'Add one flood report from a partner',
          description: `Accepted durably before the answer: a 2xx means the report is kept. The same post_id from the same partner (the name of its key) is "already exists" ever after; the first version is kept. Each partner's post_ids are its own: another partner's same post_id is another report, with a pkey of its own (partner-<key name>-<post_id>; reports accepted before post_ids were per partner keep partner-<post_id>). Bodies up to ${MAX_BODY_BYTES / 1024} KiB.`,
          security: [{ ApiKey: [] }],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: { $ref: '#/components/schemas/PartnerReport' },
                example: {
                  post_id: 1,
                  created_at: '2026-11-21T13:05:00+08:00',
                  partner_city: 'Quezon City',
                  disaster_type: 'flood',
                  location: { lat: 14.6516, lng: 121.0497 },
                  title: 'Baha sa QMC',
                  text: 'Hanggang tuhod',
                },
              },
            },
          },
          responses: {
            '201': {
              description: 'Created.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Created' }, example: { post_id: 1, created: true, pkey: 'partner-alpha-1' } } },
            },
            '200': {
              description: 'This partner already posted a report with this post_id; nothing changed.',
              content: {
                'application/json': {
                  schema: { $ref: '#/components/schemas/AlreadyExists' },
                  example: { post_id: 1, created: false, pkey: 'partner-alpha-1', message: 'post_id 1 already exists' },
                },
              },
            },
            '400': error('The body is not valid JSON or breaks the schema; every problem is listed.', {
              statusCode: 400,
              error: 'Bad Request',
              message: 'The report is invalid; see details for each problem.',
              details: [{ in: 'body', field: 'location.lat', message: 'must be between -90 and 90' }],
            }),
            '401': error('X-Api-Key is missing.'),
            '403': error('X-Api-Key is not a valid key.'),
            '413': error('The body is larger than 64 KiB once decoded (gzip undone; a JSON escape counts as its bytes).'),
            '415': error('The body is not JSON, names a charset other than UTF-8, or has a Content-Encoding other than gzip, deflate and br.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
  {
    path: '/feeds/partner/:postId',
    serve: { delete: 'retractPartnerReport' },
    doc: () => ({
      '/feeds/partner/{post_id}': {
        delete: {
          operationId: 'retractPartnerReport',
          summary: 'Retract a report the same partner posted',
          description:
            'States: a report is `confirmed` when accepted and `retracted` once withdrawn; retraction is final (a later post of the post_id answers 200 "already exists" with `retracted: true`). Only the partner whose key (by name) posted it may retract it here: the post_id is the calling partner\'s own, so another partner\'s report of the same post_id is not found (404) and never touched; the operators may retract any report (`flood-archive retract`). Durable before the answer; a repeat answers 200 again with the first retraction\'s time. The report leaves every archive answer at once, and its title, text and URLs are purged from storage by the next compaction.',
          security: [{ ApiKey: [] }],
          parameters: [{ name: 'post_id', in: 'path', required: true, description: 'Digits, their value at most 2^53-1 (9007199254740991); leading zeros allowed.', schema: { type: 'string', pattern: POST_ID_STRING_PATTERN } }],
          responses: {
            '200': {
              description: 'Retracted (now or before).',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Retracted' }, example: { post_id: 1, pkey: 'partner-alpha-1', retracted: true, retracted_at: '2026-11-22T01:00:00.000Z' } } },
            },
            '400': error('The post_id is not a non-negative integer.'),
            '401': error('X-Api-Key is missing.'),
            '403': error('X-Api-Key is not a valid key, or was revoked.'),
            '404': error('This partner posted no report with this post_id.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
];
