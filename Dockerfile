# syntax=docker/dockerfile:1
#
# agent-authz: one image build, two targets.
#
#   docker build -t agent-authz:sidecar .                      # default target (last stage)
#   docker build -t agent-authz:gateway --target gateway .
#
#   docker run -d -p 8700:8700 -v authz-data:/data \
#     -e SIDECAR_MASTER_KEY="$(openssl rand -base64 32)" agent-authz:sidecar
#   docker run -d -p 8080:8080 -v "$PWD/gateway.yaml:/config/gateway.yaml:ro" \
#     -e GATEWAY_API_KEY=aak_... agent-authz:gateway
#
# The build stage compiles the TypeScript sources to dist/ and prunes node_modules to the
# production dependencies; the runtime runs the compiled JavaScript on plain `node` (no tsx,
# no TypeScript). docs/operations.md describes the targets, volumes, ports and probes;
# test/package/docker.test.ts replays this file (every COPY, every RUN) and starts both targets.

# --- build: dependencies, then the compiled JavaScript -------------------------------------------
FROM node:24-bookworm-slim AS build
# better-sqlite3 downloads a prebuilt binary; python3, make and g++ build it where none fits.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# The workspaces' manifests (packages/*: the client, gateway and receiver packages, README "Packages"):
# npm ci installs the lockfile's whole tree, workspaces included. The image itself runs the root package.
COPY packages/client/package.json ./packages/client/
COPY packages/gateway/package.json ./packages/gateway/
COPY packages/receiver/package.json ./packages/receiver/
# --ignore-scripts: no development setup (the Node binaries of the test devDependencies, tap's
# plugins); then the one install script the image needs, better-sqlite3's native binary.
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY runtime ./runtime
COPY sidecar ./sidecar
COPY gateway-plugin ./gateway-plugin
COPY console ./console
# tsc to dist/, then Vite builds the account holder's console into dist/console/ (the two steps of
# scripts/build-dist.mjs, run directly: the image builds once, in a fresh directory, so it needs
# neither the build lock nor the swap that `npm run build` adds for a checkout).
RUN npx tsc -p tsconfig.build.json && npx vite build --config console/vite.config.ts
# Production dependencies only (fastify stays: a peer dependency is not a dev dependency); the workspace
# links (node_modules/@agent-authz/* → packages/*) go: the runtime stage has no packages/.
RUN npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/@agent-authz \
 && node -e "require('better-sqlite3')(':memory:').close(); require.resolve('fastify')"

# --- runtime: compiled code and pruned node_modules, owned by root, run as `node` ---------------
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
RUN mkdir -p /data /config && chown node:node /data
USER node

# --- gateway: the standalone proxy (its config file mounted at /config/gateway.yaml) ------------
FROM runtime AS gateway
# 8080: the proxy listener (with /healthz, /readyz); 9464: the metrics listener.
EXPOSE 8080 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/agent-authz-gateway.mjs"]
CMD ["--config", "/config/gateway.yaml"]

# --- sidecar (default target): API, /healthz, /readyz, /metrics, /openapi.json on 8700 ----------
FROM runtime AS sidecar
ENV SIDECAR_HOST=0.0.0.0 \
    SIDECAR_PORT=8700 \
    SIDECAR_DATA_DIR=/data
VOLUME /data
EXPOSE 8700
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.SIDECAR_PORT || 8700) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "bin/agent-authz-sidecar.mjs"]
