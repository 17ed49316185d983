# bootfleet: run `make test` (installs what it needs; run as root) or `make demo`.
GO      ?= go
BIN     := bin/bootfleet
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/bootfleet/bootfleet/internal/buildinfo.version=$(VERSION)
PKGS    := ./...
export CGO_ENABLED := 0

.PHONY: all build deb deps test unit e2e e2e-failover e2e-arm64 demo bench bench-tools bench-transfer bench-dhcp bench-dhcp-fleet bench-telemetry bench-nbd bench-storm bench-boot fuzz fuzz-long vet clean

all: build

# bootfleet, and beside it the static agent `bootfleet initramfs build` packs,
# for this machine and cross-compiled for arm64 (bootfleet-agent-arm64, for
# `initramfs build --agent` with an arm64 kernel package).
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/bootfleet
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)-agent ./cmd/bootfleet-agent
	GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)-agent-arm64 ./cmd/bootfleet-agent

# The Debian package (dist/bootfleet_VERSION_amd64.deb): scripts/mkdeb.sh.
deb: build
	scripts/mkdeb.sh dist

deps:
	scripts/deps.sh

# Three Go modules: the product (.), the e2e tests (test/e2e, which need a
# browser driver) and the benchmarks (bench, which need a plotting library);
# what only tests and benchmarks use stays out of the product's go.mod.
vet:
	$(GO) vet $(PKGS)
	@unformatted=$$($$($(GO) env GOROOT)/bin/gofmt -l cmd internal bench test); \
	  [ -z "$$unformatted" ] || { echo "not gofmt-clean (run gofmt -w):" $$unformatted >&2; exit 1; }
	@! $(GO) list -m all | grep -E 'chromedp|gonum' || { echo "a test-only or bench-only module entered the product's go.mod" >&2; exit 1; }
	cd test/e2e && $(GO) vet ./... && $(GO) vet -tags e2earm64 ./...
	cd bench && $(GO) vet ./...

# Everything: unit, golden, fuzz seed corpora, interop with real tools and
# VM boots with real firmware. Needs root (namespaces, taps, port 67/69).
# The VM boots take about 40 minutes on a quiet 2-core machine (those of
# one VM at a time two at once); the timeout leaves room for a loaded one.
test: deps vet build
	$(GO) test -count=1 -timeout 30m $(PKGS)
	cd bench && $(GO) test -count=1 ./...
	cd test/e2e && $(GO) test -count=1 -parallel 2 -timeout 70m ./...

# Fast feedback without VMs.
unit:
	$(GO) test -count=1 $(PKGS)
	cd bench && $(GO) test -count=1 ./...

e2e: deps build
	cd test/e2e && $(GO) test -count=1 -v -parallel 2 -timeout 70m .

# Only the failover proof (servers killed under a diskless VM); its figures
# go to test/e2e/artifacts/TestNBDFailover/failover-runs.txt.
e2e-failover: deps build
	cd test/e2e && $(GO) test -count=1 -v -run 'TestNBDFailover$$' -timeout 30m .

# The arm64 VM boots, with the stock Debian 12 arm64 diskless root
# (TestARM64DebianDiskless, built only with -tags e2earm64): its first
# image build, debootstrap under qemu-user, is too slow for `make test`;
# see the README's ARM64 section.
e2e-arm64: deps build
	cd test/e2e && $(GO) test -tags e2earm64 -count=1 -v -run 'TestARM64' -timeout 60m .

demo: deps build
	scripts/demo.sh

# Benchmarks (bench/, one harness; see bench/harness): each writes its
# report beside the peers measured in the same run and the physical limit,
# then BENCHMARKS.md, the index. `make bench` runs them all (about an hour);
# each also runs alone, with its flags in ARGS, e.g.
# make bench-transfer ARGS='-quick'.
bench: bench-tools
	bin/bench all
	bin/bench index

bench-tools: deps build
	scripts/bench-deps.sh

bench-transfer bench-dhcp bench-dhcp-fleet bench-telemetry: bench-tools
	bin/bench $(@:bench-%=%) $(ARGS)

bench-nbd: bench-tools
	bin/bench nbd $(ARGS)

# Boot storms of 1 to 200 emulated machines (bootfleet storm) against
# dnsmasq + nginx + nbdkit on a 1 Gbit/s server link, replaying the Debian
# trace (BENCHMARKS-storm.md), then the desktop trace
# (BENCHMARKS-storm-desktop.md; its flags in DESKTOP_ARGS). An hour or
# more, so not in bench.
bench-storm: bench-tools
	bin/bench storm $(ARGS)
	bin/bench storm-desktop $(DESKTOP_ARGS)

# Whole VM boots, bootfleet against dnsmasq + a static web server and a
# direct -kernel boot (BENCHMARKS-boot.md). About 10 minutes, so not in bench.
bench-boot: bench-tools
	cd test/e2e && $(GO) test -count=1 -run=NONE -bench=Boot -benchtime=1x -timeout 60m .
	bin/bench index

# Runs every fuzz target for FUZZTIME each (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./internal/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Long campaigns of every fuzz target, LONGFUZZTIME each (default 10m: about
# four hours for all). A crasher the fuzzer finds is written to its package's
# testdata/fuzz/FuzzX/ and stays there as a seed, so make test replays it
# from then on; commit it with the fix.
LONGFUZZTIME ?= 10m
fuzz-long:
	$(MAKE) fuzz FUZZTIME=$(LONGFUZZTIME)

clean:
	rm -rf bin dist
