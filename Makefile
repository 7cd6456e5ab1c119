# Everyday commands. `make test` is what CI runs (.ci/run runs scripts/test).

GO ?= go

.PHONY: test faults bench-resume

# The whole suite: gofmt, go vet, the race-enabled tests, the fault suite
# and a short fuzz pass.
test:
	scripts/test

# The fault-injection suite alone: each role and NATS killed with SIGKILL at
# named points under 50 overlapping runs, four loops at once, counts
# printed. HARNESS_FAULT_SEED=N make faults replays a seed's plan.
faults:
	$(GO) test -count=1 -run '^TestFaults$$' -parallel 4 -timeout 12m -v ./tests/faults

# Resume against a bare ordered consumer, and the rebuild alone
# (docs/benchmarks.md).
bench-resume:
	$(GO) test -run '^$$' -bench 'BenchmarkResume' -benchtime 10x ./pkg/coordinator
	$(GO) test -run '^$$' -bench 'BenchmarkRebuild' -benchtime 20x ./pkg/coordinator
