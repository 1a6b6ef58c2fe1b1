# Tool versions are pinned here and installed into .tmp/bin, so `make
# generate` produces the same code on every machine.
BUF_VERSION            := v1.61.0
PROTOC_GEN_GO_VERSION  := v1.36.12
CONNECT_GO_VERSION     := v1.21.1
GRPCURL_VERSION        := v1.9.3
# Staticcheck 2026.2.2: analyses Go 1.26 code.
STATICCHECK_VERSION    := v0.8.2

BIN      := $(abspath .tmp/bin)
# The TypeScript plugin is the npm package pinned in
# clients/typescript/package-lock.json, installed as .ci/install-deps does.
PROTOC_GEN_ES := clients/typescript/node_modules/.bin/protoc-gen-es
export PATH := $(BIN):$(PATH)
GO       ?= go
CONFIG   ?=
# The console's browser tests write their screenshots here
# (docs/console.md, "Tests in a real browser").
SCREENSHOTS ?= $(abspath test-output/console)

.PHONY: all run build test test-short deps fuzz bench bench-nodes bench-smoke bench-scale bench-console eval eval-real generate checkgenerate lint tools clean

all: lint test

## run: start preceptd on its embedded defaults (or CONFIG=path.yaml)
run:
	$(GO) run ./cmd/preceptd $(if $(CONFIG),--config $(CONFIG))

## build: build preceptd and precept into ./bin
build:
	$(GO) build -o bin/ ./cmd/...

## test: the full suite against real Redis, Chroma, git and chromium,
## then bench-smoke and fuzz; installs what it needs first
## (.ci/install-deps: apt-get redis-server, chromium, python3-redis,
## prometheus for promtool; npm Chroma, the TypeScript client's packages
## and the TypeScript MCP SDK)
test: deps $(BIN)/grpcurl
	@echo "console screenshots: $(SCREENSHOTS)"
	PRECEPT_SCREENSHOTS=$(SCREENSHOTS) $(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) bench-smoke
	$(MAKE) fuzz

## deps: system packages, the pinned Chroma server and the MCP SDK the
## tests use
deps:
	@.ci/install-deps

## test-short: unit tests only, no external servers
test-short:
	$(GO) test -short -count=1 ./...

## fuzz: run each fuzz target briefly. Budgets are counts of executions
## (about 10s each here; the text sanitiser's executions are heavier, so
## it gets fewer), not durations: Go 1.26's fuzz coordinator can
## fail a run with "context deadline exceeded" when a -fuzztime duration
## expires on a busy machine (go.dev/issue/75804, fixed in Go 1.27).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEntry$$' -fuzztime 200000x ./internal/stream
	$(GO) test -run '^$$' -fuzz '^FuzzParseDecisionJSON$$' -fuzztime 200000x .
	$(GO) test -run '^$$' -fuzz '^FuzzSanitiser$$' -fuzztime 20000x ./lib/safetext
	$(GO) test -run '^$$' -fuzz '^FuzzScopePath$$' -fuzztime 200000x ./prompts
	$(GO) test -run '^$$' -fuzz '^FuzzDraftingAndGuardsNeverPanic$$' -fuzztime 20000x ./rules
	$(GO) test -run '^$$' -fuzz '^FuzzStrictJSON$$' -fuzztime 30000x ./internal/api
	$(GO) test -run '^$$' -fuzz '^FuzzInteractionPayload$$' -fuzztime 200000x ./internal/slackapp
	$(GO) test -run '^$$' -fuzz '^FuzzClassifyNeverPanics$$' -fuzztime 20000x ./lesson
	$(GO) test -run '^$$' -fuzz '^FuzzRuleFilesFromARemote$$' -fuzztime 100000x ./rules/rulefmt

## bench: the issues' benchmark figures. The system benchmarks in
## internal/app measure themselves once (ingest vs raw Redis; classify and
## ingest+classify per index backend at 10k and 100k stored; BuildPrompt vs
## echo, latency, approval-to-watcher; ingest while repositories are
## maintained; every console page's server time at 100k stored decisions
## and 200 rules, BenchmarkConsolePages, about 6 minutes); the others are
## micro-benchmarks, and bench-nodes.
## PRECEPT_BENCH_SIZES lists the counts of stored decisions to measure at
## instead of 10000,100000 (testenv.BenchSizes; benchmarks of one size
## scale with the largest); PRECEPT_BENCH_SIZES=10000 and
## PRECEPT_BENCH_BACKENDS=embedded shorten it.
bench:
	$(GO) test -run '^$$' -bench 'BenchmarkIngest$$|BenchmarkIngestClassify|BenchmarkPrompt$$|BenchmarkMaintainDuringIngest|BenchmarkLearningLoopCost|BenchmarkConsolePages' -benchtime 1x -timeout 90m ./internal/app
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./evaluator/... ./analytics/... ./lib/embedding/... ./feedbackstore/... ./lib/vectorindex/... ./prompts/... ./internal/stream/... ./internal/slackapp/...
	$(MAKE) bench-nodes

## bench-nodes: preceptd on one node and on three against one git server
## and one Redis (BenchmarkNodes: ingest, ingest + classify, CPU, the
## clusters every node lists, approval to prompt on every node), and what
## one branch of the git server takes from one store and from three
## (BenchmarkOneBranch); docs/decisions/0019-evaluation-across-nodes.md.
bench-nodes:
	$(GO) test -run '^$$' -bench 'BenchmarkOneBranch$$' -benchtime 1x -timeout 30m ./feedbackstore
	$(GO) test -run '^$$' -bench 'BenchmarkNodes$$' -benchtime 1x -timeout 60m ./cmd/preceptd

## bench-smoke: every benchmark of the module once (-benchtime 1x) at
## PRECEPT_BENCH_SIZES=$(BENCH_SMOKE_SIZES), against the real servers the
## tests start; about 3 minutes on 2 cores. It checks that each benchmark
## still runs on its own fixture, not its figures (a benchmark that holds
## itself to a budget, such as the console's p99, still fails over it).
## It prints how many benchmarks ran, and fails when one fails, panics,
## skips or does not report.
BENCH_SMOKE_SIZES ?= 1000
bench-smoke:
	@log=$$(mktemp) && rc=$$(mktemp) && trap 'rm -f "$$log" "$$rc"' EXIT && \
	{ PRECEPT_BENCH_SIZES=$(BENCH_SMOKE_SIZES) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m -v ./... 2>&1; \
		echo $$? >"$$rc"; } | tee "$$log" && \
	declared=$$(git ls-files -co --exclude-standard '*_test.go' | xargs grep -h '^func Benchmark' | wc -l); \
	ran=$$(awk '/^pkg: /{pkg=$$2} /^Benchmark[^ \t]*[ \t]+[0-9]+[ \t]+[0-9.]+ ns\/op/{split($$1, n, "[/-]"); print pkg, n[1]}' "$$log" | sort -u | wc -l); \
	echo "bench-smoke: $$ran of $$declared benchmarks ran at PRECEPT_BENCH_SIZES=$(BENCH_SMOKE_SIZES)"; \
	if grep -E '^ *--- (SKIP|FAIL): Benchmark|^panic:|^FAIL' "$$log"; then exit 1; fi; \
	test "$$(cat "$$rc")" = 0 || exit 1; \
	test "$$ran" -eq "$$declared" || { echo "bench-smoke: $$((declared - ran)) benchmarks reported no result"; exit 1; }

## bench-scale: BenchmarkScale, the store built to 1M decisions on the
## embedded defaults, its curve printed at 100k, 250k, 500k and 1M
## (README, "Benchmarks"); about an hour on 2 cores and 10 GB of disk.
## BENCH_SCALE=100000,250000 measures part of the curve.
BENCH_SCALE ?= 100000,250000,500000,1000000
bench-scale:
	PRECEPT_BENCH_SCALE=$(BENCH_SCALE) $(GO) test -run '^$$' -bench 'BenchmarkScale$$' -benchtime 1x -timeout 4h -v ./internal/app

## bench-console: BenchmarkConsolePages alone (docs/console.md,
## "Performance"); PRECEPT_BENCH_SIZES=10000 for a quick run.
bench-console:
	$(GO) test -run '^$$' -bench 'BenchmarkConsolePages$$' -benchtime 1x -timeout 30m ./internal/app

## eval: precept's judgement on the labelled feedback in testdata/feedback,
## through the real evaluator on its embedded defaults: pairwise
## precision/recall/F1, class and category accuracy, confusion per file
## (docs/lessons.md, "Evaluation"). EVAL_FLAGS=-v lists category errors.
eval:
	$(GO) run ./cmd/precept-eval $(EVAL_FLAGS)

## eval-real: the same figures on real reviewers' comments, each split on
## its own: the manifest is testdata/real/manifest.jsonl, the texts a
## git-ignored cache (PRECEPT_REAL_CACHE, default .cache/real-comments)
## that says so when it is absent (docs/lessons.md, "Real reviewers' words")
eval-real:
	$(GO) run ./cmd/precept-eval -real testdata/real/manifest.jsonl $(EVAL_FLAGS)

## generate: regenerate protobuf and Connect code from proto/: Go into
## gen/, TypeScript into clients/typescript/gen/ (docs/clients.md)
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-connect-go $(PROTOC_GEN_ES)
	buf generate

## checkgenerate: fail when committed generated code is stale
checkgenerate: generate
	@if [ -n "$$(git status --porcelain -- gen clients/typescript/gen)" ]; then \
		git status --porcelain -- gen clients/typescript/gen; \
		echo "generated code is stale: run 'make generate' and commit"; exit 1; fi

## lint: gofmt, go mod tidy, go vet, staticcheck, buf lint
lint: $(BIN)/buf $(BIN)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	staticcheck ./...
	buf lint

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-connect-go $(BIN)/grpcurl $(BIN)/staticcheck

$(PROTOC_GEN_ES):
	npm ci --prefix clients/typescript --no-audit --no-fund --loglevel=error

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-connect-go:
	GOBIN=$(BIN) $(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(CONNECT_GO_VERSION)
$(BIN)/grpcurl:
	GOBIN=$(BIN) $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

clean:
	rm -rf .tmp bin
