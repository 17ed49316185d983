// Package e2e boots real firmware against a real bootfleet process: QEMU VMs
// (OVMF UEFI and SeaBIOS with QEMU's iPXE ROM) on a bridge inside a private
// network namespace, booting the tiny Linux from scripts/mkimage.sh, whose
// init calls the DoneURL and powers off.
//
// The tests need root, qemu-system-x86_64, OVMF, iPXE and dnsmasq (install
// them with scripts/deps.sh). Without them the tests skip, unless
// BOOTFLEET_CI=1, where a missing tool is a failure. Each boot takes 30-70 s
// under TCG, so -short skips them too (again, not with BOOTFLEET_CI=1).
//
// The package is its own Go module, so that the browser driver the
// dashboard test uses (chromedp) stays out of the product's module; `make
// test` and `make e2e` run it with `cd test/e2e && go test .`.
//
// Serial consoles, server logs and configs of every run are kept under
// test/e2e/artifacts/<test>/ for post-mortems. Environment knobs:
//
//	BOOTFLEET_CI=1          missing prerequisites fail instead of skip
//	BOOTFLEET_BIN=path      use this bootfleet binary instead of building one
//	BOOTFLEET_CACHE=dir     where mkimage.sh keeps .debs and the image (default /var/cache/bootfleet-e2e)
//	BOOTFLEET_E2E_PCAP=1    also capture br0 with tshark into the artifacts
//	BOOTFLEET_E2E_TIMEOUT   per-VM boot timeout as a Go duration (default 300s)
//
// BenchmarkBoot (`make bench-boot`) times whole boots against dnsmasq + a
// static web server and writes BENCHMARKS-boot.md with the statistics of
// bench/harness; BOOTFLEET_BENCH_ROUNDS (default 3) and BOOTFLEET_BENCH_FW
// (default bios,uefi) tune it.
package e2e
