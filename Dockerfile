# The velodex image (registry and operator in one) for machines with a Docker engine. `make image`
# builds the equivalent image without one (hack/image/build.ts): same layout, same entrypoint.
#   docker build -t velodex/velodex:dev .
#   docker run -p 8080:8080 velodex/velodex:dev           # the registry, embedded default config
#   (the operator: command ["node", "/app/operator/dist/main.js"], as the Helm chart sets it)
FROM node:20.20.2-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json ./
COPY registry/package.json registry/
COPY operator/package.json operator/
RUN npm ci --no-audit --no-fund
COPY registry registry
COPY operator operator
RUN npm run build \
 && rm -rf node_modules \
 && npm ci --omit=dev --ignore-scripts --no-audit --no-fund
# The version /+status reports, stamped with the commit as `make image` does (hack/image/version.ts):
#   docker build --build-arg VELODEX_REVISION="$(git rev-parse --short=12 HEAD)" -t velodex/velodex:dev .
ARG VELODEX_REVISION=""
RUN if [ -n "$VELODEX_REVISION" ]; then node -e 'const fs = require("fs"); const f = "registry/package.json"; const m = JSON.parse(fs.readFileSync(f, "utf8")); m.version += "+" + process.env.VELODEX_REVISION; fs.writeFileSync(f, JSON.stringify(m, null, 2) + "\n");'; fi

FROM node:20.20.2-bookworm-slim
ENV NODE_ENV=production
# glibc's malloc keeps up to 32 MiB of freed memory instead of faulting it in again for every
# streamed body (registry/src/workers/allocator-env.ts; keep the two alike).
ENV GLIBC_TUNABLES=glibc.malloc.trim_threshold=33554432
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/registry/package.json registry/
COPY --from=build /src/registry/bin registry/bin
COPY --from=build /src/registry/dist registry/dist
COPY --from=build /src/operator/package.json operator/
COPY --from=build /src/operator/dist operator/dist
USER 65532:65532
EXPOSE 8080
# V8 flags of a serving process (registry/src/workers/v8-flags.ts; keep the two alike).
ENTRYPOINT ["node", "--no-memory-reducer", "/app/registry/dist/cli.js"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "--data-dir", "/tmp/velodex"]
