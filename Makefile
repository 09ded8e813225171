# velodex: `make run` starts the server with the embedded default; `make test` runs every suite.
# Both install what they need on a fresh machine (npm ci; `make test` also runs hack/tools.sh).

NPM_STAMP := node_modules/.package-lock.json

.PHONY: run build install tools image kind-e2e test test-only test-fs test-s3 lint typecheck bench bench-tools clean

run: build
	node --no-memory-reducer registry/dist/cli.js serve

install: $(NPM_STAMP)

$(NPM_STAMP): package.json package-lock.json registry/package.json operator/package.json
	npm ci --no-audit --no-fund
	@touch $(NPM_STAMP)

build: install
	npm run --silent build

typecheck: build
	npx tsc -p test --noEmit
	npx tsc -p registry/ui

lint: install
	npx eslint --max-warnings 0 .

tools:
	bash hack/tools.sh

# The velodex image without a Docker engine: an OCI archive at .tools/images/velodex.oci.tar that
# ctr, crane push and kind load image-archive take (hack/image/build.ts; the Dockerfile is its twin).
image: build
	node --import tsx hack/image/build.ts --out .tools/images/velodex.oci.tar

# The end-to-end flow of docs/kubernetes.md on a kind cluster, for a machine with a Docker engine
# that can pull kind's node image (the suites run the same flow on a cluster of their own).
kind-e2e: build
	bash hack/kind-e2e.sh


# Lint and typecheck first: they are cheap and fail fast.
test: build typecheck lint tools test-only

# The suites alone, for a machine where build and tools are already done: every suite on the fs
# backend, then the server suites again on s3 (the two projects of vitest.config.ts; a plain
# `npx vitest run` runs both at once).
test-only: test-fs test-s3

test-fs:
	npx vitest run --project fs

test-s3:
	npx vitest run --project s3

# velodex beside its peers (pypiserver; the Distribution registry) in one run; prints ratios, never
# fails on speed. bench-tools builds the optional peers `make test` does not need (hack/go-tools.sh).
bench: build tools bench-tools
	node --import tsx test/bench/run.ts

bench-tools:
	bash hack/go-tools.sh bench .tools/bin

clean:
	rm -rf registry/dist operator/dist registry/tsconfig.tsbuildinfo operator/tsconfig.tsbuildinfo
