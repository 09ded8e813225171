# velodex: `make run` starts the server with the embedded default; `make test` runs every suite.
# Both install what they need on a fresh machine (npm ci; `make test` also runs hack/tools.sh).

NPM_STAMP := node_modules/.package-lock.json

.PHONY: run build install tools test test-only lint typecheck bench bench-tools clean

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

lint: install
	npx eslint --max-warnings 0 .

tools:
	bash hack/tools.sh

# Lint and typecheck first: they are cheap and fail fast.
test: build typecheck lint tools
	npx vitest run

# The suites alone, for a machine where build and tools are already done.
test-only:
	npx vitest run

# velodex beside its peers (pypiserver; the Distribution registry) in one run; prints ratios, never
# fails on speed. bench-tools builds the optional peers `make test` does not need (hack/go-tools.sh).
bench: build tools bench-tools
	node --import tsx test/bench/run.ts

bench-tools:
	bash hack/go-tools.sh bench .tools/bin

clean:
	rm -rf registry/dist operator/dist registry/tsconfig.tsbuildinfo operator/tsconfig.tsbuildinfo
