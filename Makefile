# bootfleet: run `make test` (installs what it needs; run as root) or `make demo`.
GO      ?= go
BIN     := bin/bootfleet
PKGS    := ./...
export CGO_ENABLED := 0

.PHONY: all build deps test unit e2e demo bench bench-boot fuzz vet clean

all: build

# bootfleet, and beside it the static agent `bootfleet initramfs build` packs.
build:
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN) ./cmd/bootfleet
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN)-agent ./cmd/bootfleet-agent

deps:
	scripts/deps.sh

vet:
	$(GO) vet $(PKGS)

# Everything: unit, golden, fuzz seed corpora, interop with real tools and
# VM boots with real firmware. Needs root (namespaces, taps, port 67/69).
test: deps vet build
	$(GO) test -count=1 -timeout 50m $(PKGS)

# Fast feedback without VMs.
unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/e2e)

e2e: deps build
	$(GO) test -count=1 -v -timeout 30m ./test/e2e/

demo: deps build
	scripts/demo.sh

# TFTP/HTTP (BENCHMARKS.md), DHCP DORA (BENCHMARKS-dhcp.md), telemetry
# on vs off (BENCHMARKS-telemetry.md), NBD against qemu-nbd, nbdkit and nbd-server (BENCHMARKS-nbd.md).
bench: deps build
	scripts/bench.sh
	scripts/bench-dhcp.sh
	scripts/bench-telemetry.sh
	scripts/bench-nbd.sh

# Whole VM boots, bootfleet against dnsmasq + a static web server and a
# direct -kernel boot (BENCHMARKS-boot.md). About 10 minutes, so not in bench.
bench-boot: deps
	$(GO) test -count=1 -run=NONE -bench=Boot -benchtime=1x -timeout 60m ./test/e2e/

# Runs every fuzz target for FUZZTIME each (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./internal/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin
