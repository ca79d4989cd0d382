# syntax=docker/dockerfile:1
# The mds image. Default target: the operator (`mds operator`), which holds only what that command loads (the
# bundled operator and the one package it requires at run time: scripts/image/operator-app.ts). `--target service`
# builds the service image: every command, all production dependencies, and the PostgreSQL client tools (pg_dump,
# pg_restore) it runs for backups and restores.
#
#   docker build --build-arg MDS_COMMIT=$(git rev-parse HEAD) -t mds:0.2.0 .
#   docker build --build-arg MDS_COMMIT=$(git rev-parse HEAD) --target service -t mds-service:0.2.0 .
#
# MDS_VERSION must be package.json's version (test/deploy/image.test.ts checks the default); MDS_COMMIT becomes
# dist/build-commit, which `mds operator` reports in its startup log and mds_build_info ("unknown" without it).
#
# Why compiled JavaScript rather than Node 24 running the .ts sources (as bin/mds.js does in development):
# the build stage type-checks everything (`tsc` fails the build on a type error), the image carries neither
# TypeScript nor the sources' dev tooling, and start-up skips type stripping of every module.
# test/deploy/image.test.ts checks this file and runs the same production file set (dist/ + production
# dependencies only) outside Docker. Without a registry, scripts/build-image.sh (`npm run image`) builds the same
# /app on a Debian base made by mmdebstrap and imports it into podman; docs/image.md tells both ways.

ARG NODE_IMAGE=node:24-bookworm-slim
ARG MDS_VERSION=0.2.0
ARG MDS_COMMIT=unknown

# 1. Compile src/ to dist/ (dev dependencies are needed here only). src/ is the product alone: test support (the chaos
#    harness, fault proxy, public-API emulator, fakes) lives in test/support/, which no stage copies; eslint forbids
#    src/ to import it and test/deploy/image.test.ts checks that dist/ holds none of it.
FROM ${NODE_IMAGE} AS build
ARG MDS_COMMIT
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/bundle-operator.ts ./scripts/
# src/ is all the product: devkube (packages/devkube/) and the local stack that starts it (dev/) are development
# and test tools outside it, so neither is in the build context, and `npm ci --omit=dev` below leaves out devkube and
# the packages only it needs (it is a devDependency).
COPY src ./src
# The operator's entry, dist/cli/operator.js, becomes one file with everything it imports (our modules and the npm
# packages): one module for V8 to keep instead of 433, 4-5 MB less RSS (scripts/bundle-operator.ts says why).
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json \
 && node scripts/bundle-operator.ts dist \
 && echo "$MDS_COMMIT" > dist/build-commit \
 && cd src && find . -type f ! -name '*.ts' -exec cp --parents {} ../dist/ \;

# 2. Production dependencies only.
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

# 3. The settings both images run with.
FROM ${NODE_IMAGE} AS base
ARG MDS_VERSION
ARG MDS_COMMIT
# The OCI annotations (image-spec annotations.md), so `docker inspect` or `podman inspect` names the release.
LABEL org.opencontainers.image.title="mds" \
      org.opencontainers.image.description="Kubernetes operator for managed PostgreSQL" \
      org.opencontainers.image.version="${MDS_VERSION}" \
      org.opencontainers.image.revision="${MDS_COMMIT}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
# glibc malloc: two arenas instead of one per thread, and freed memory handed back to the OS. The operator's RSS at
# 10,000 Databases fell by about 12 MB with nothing slower (bench/operator-rss.ts reads this line and gives its
# operator process the same environment). Blocks of 32 KiB and more are mmapped, so returned on free: zlib's windows
# (the informer caches inflate and deflate one object at a time) otherwise fragmented glibc's heap, 47 MB of it at
# 2,000 Databases against 18 MB with this threshold (RSS 142.5 → 108.5 MB, bench/operator-rss.ts --env).
ENV MALLOC_ARENA_MAX=2 MALLOC_TRIM_THRESHOLD_=131072 MALLOC_MMAP_THRESHOLD_=32768
WORKDIR /app

# 4. The service's /app, and what the operator's is taken from: dist/, production node_modules, package.json (it
#    declares ESM), the entry point.
FROM base AS runtime
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY deploy/image/mds.js ./bin/mds.js
# A numeric non-root user, so Kubernetes' runAsNonRoot can verify it; it owns nothing in the image.
USER 65532:65532

# 5. The service: adds pg_dump and pg_restore.
FROM runtime AS service
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-client \
 && rm -rf /var/lib/apt/lists/*
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["node", "/app/bin/mds.js", "service"]

# 6. The operator's /app: only what `mds operator` loads (scripts/image/operator-app.ts says what and why).
FROM runtime AS operator-app
USER root
COPY scripts/image/operator-app.ts /tmp/operator-app.ts
RUN node /tmp/operator-app.ts /app /operator-app

# 7. The operator (the default target: last stage): the base and that /app, nothing else.
FROM base AS operator
COPY --from=operator-app /operator-app/ ./
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["node", "/app/bin/mds.js", "operator"]
