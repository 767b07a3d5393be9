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
# The TypeScript sources run through tsx (a runtime dependency), as with `npm start`.
# docs/operations.md describes the targets, volumes, ports and probes.

# --- build: dependencies (better-sqlite3 compiles here when no prebuilt binary fits) ---
FROM node:24-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# Keep only runtime dependencies (tsx is one: it runs the TypeScript sources).
RUN npm prune --omit=dev --no-audit --no-fund \
 && node -e "require.resolve('tsx/esm/api'); require('better-sqlite3')(':memory:').close()"

# --- runtime: the code and the pruned node_modules, owned by root, run as `node` ---
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY sidecar ./sidecar
COPY gateway-plugin ./gateway-plugin
COPY receiver ./receiver
RUN mkdir -p /data /config && chown node:node /data
USER node

# --- gateway: the standalone proxy (its config file mounted at /config/gateway.yaml) ---
FROM runtime AS gateway
# 8080: the proxy listener (with /healthz, /readyz); 9464: the metrics listener.
EXPOSE 8080 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/agent-authz-gateway.mjs"]
CMD ["--config", "/config/gateway.yaml"]

# --- sidecar (default target): API, /healthz, /readyz, /metrics, /openapi.json on 8700 ---
FROM runtime AS sidecar
ENV SIDECAR_HOST=0.0.0.0 \
    SIDECAR_PORT=8700 \
    SIDECAR_DATA_DIR=/data
VOLUME /data
EXPOSE 8700
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.SIDECAR_PORT || 8700) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "bin/agent-authz-sidecar.mjs"]
