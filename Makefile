# velodex: `make run` starts the server with the embedded default; `make test` runs every suite.
# Both install what they need on a fresh machine (npm ci; `make test` also runs hack/tools.sh).

NPM_STAMP := node_modules/.package-lock.json

.PHONY: run build install tools image kind-e2e test test-only test-fs test-s3 lint typecheck bench bench-tools clean

run: build
	node registry/dist/cli.js serve

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

# The suites that start servers run a second time on the s3 backend (a real MinIO that
# test/support/s3-global.ts starts; every server gets its own prefix of one bucket). The storage
# suites test both backends themselves; config, cli and http test the command, the loader and
# request parsing, which no store changes; the suites that start several processes on a MinIO of
# their own ran on s3 already in the first pass.
S3_SUITES := test/python test/oci test/access test/roles test/discovery test/events test/observe test/limits test/archive test/lifecycle/gc.test.ts test/lifecycle/quota.test.ts test/lifecycle/budget.test.ts test/tls/clients.test.ts
S3_OWN_MINIO := --exclude '**/multiprocess.test.ts' --exclude '**/sessions-shared.test.ts'

# Lint and typecheck first: they are cheap and fail fast.
test: build typecheck lint tools test-only

# The suites alone, for a machine where build and tools are already done: every suite on the fs
# backend, then the server suites again on s3.
test-only: test-fs test-s3

test-fs:
	npx vitest run

test-s3:
	VELODEX_TEST_STORAGE=s3 npx vitest run $(S3_SUITES) $(S3_OWN_MINIO)

# velodex beside its peers (pypiserver; the Distribution registry) in one run; prints ratios, never
# fails on speed. bench-tools builds the optional peers `make test` does not need (hack/go-tools.sh).
bench: build tools bench-tools
	node --import tsx test/bench/run.ts

bench-tools:
	bash hack/go-tools.sh bench .tools/bin

clean:
	rm -rf registry/dist operator/dist registry/tsconfig.tsbuildinfo operator/tsconfig.tsbuildinfo
