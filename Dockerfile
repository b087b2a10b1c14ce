# syntax=docker/dockerfile:1
# One image for every process; the command picks it: all (default), serve, worker, scheduler.

FROM node:24-bookworm-slim AS build
WORKDIR /app
# better-sqlite3 compiles where its prebuilt binary cannot be fetched.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
# The infrastructure code and the benchmark are compiled with the rest but never run from the image.
RUN npm run build && rm -rf dist/infra dist/bench && npm prune --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
# Two malloc arenas: DuckDB's and libuv's threads otherwise each keep freed memory in their own,
# which measured 40-80 MB more resident memory after long archive pulls.
ENV NODE_ENV=production \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies as built above (native addons included): no compiler in this image.
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/web ./web
COPY --from=build /app/boundaries ./boundaries
# Local state (generated key, temp files, the S3 part cache) lives in /data, owned by the unprivileged user.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
# Probes the API, so it applies to `all` and `serve`. ECS ignores it (the load balancer checks /health),
# so worker and scheduler tasks are unaffected. Slim images have no curl: Node's fetch does it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "dist/src/main/flood-archive.cjs"]
CMD ["all"]
