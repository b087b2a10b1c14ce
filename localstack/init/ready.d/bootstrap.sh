#!/bin/bash
# LocalStack runs this once it is ready to serve requests. It creates the bucket, the
# queue and its dead-letter queue with the settings of QUEUE_SETTINGS in src/bootstrap.ts
# (keep the two in step): redrive after 5 receives, 14 days' retention, and a visibility
# timeout of 2 x flush interval + 30 s.
#
# The hook runs inside the LocalStack container, which has awslocal but not the service.
# The service itself also runs the same idempotent bootstrap at start whenever
# AWS_ENDPOINT_URL is set, so either one alone is enough; this one makes the resources
# exist before the service starts (the compose healthcheck waits for them).
set -euo pipefail

BUCKET=${BUCKET:-flood-archive}
QUEUE=${QUEUE:-flood-reports}
FLUSH_INTERVAL_SECONDS=${FLUSH_INTERVAL_SECONDS:-30}
MAX_RECEIVE_COUNT=5
RETENTION_SECONDS=1209600
VISIBILITY_TIMEOUT_SECONDS=$((FLUSH_INTERVAL_SECONDS * 2 + 30))

awslocal s3api head-bucket --bucket "$BUCKET" 2>/dev/null || awslocal s3api create-bucket --bucket "$BUCKET"

# Create without attributes, then set them: CreateQueue fails on an existing queue with other attributes.
dlq_url=$(awslocal sqs create-queue --queue-name "$QUEUE-dlq" --query QueueUrl --output text)
awslocal sqs set-queue-attributes --queue-url "$dlq_url" \
  --attributes "{\"MessageRetentionPeriod\": \"$RETENTION_SECONDS\"}"
dlq_arn=$(awslocal sqs get-queue-attributes --queue-url "$dlq_url" \
  --attribute-names QueueArn --query Attributes.QueueArn --output text)

queue_url=$(awslocal sqs create-queue --queue-name "$QUEUE" --query QueueUrl --output text)
awslocal sqs set-queue-attributes --queue-url "$queue_url" --attributes "$(cat <<JSON
{
  "VisibilityTimeout": "$VISIBILITY_TIMEOUT_SECONDS",
  "MessageRetentionPeriod": "$RETENTION_SECONDS",
  "RedrivePolicy": "{\"deadLetterTargetArn\": \"$dlq_arn\", \"maxReceiveCount\": $MAX_RECEIVE_COUNT}"
}
JSON
)"

echo "flood-archive: bucket $BUCKET, queue $queue_url (visibility ${VISIBILITY_TIMEOUT_SECONDS}s), dead-letter queue $dlq_url"
