package diskprobe

import (
	"flag"
	"os"
	"testing"
)

// TestMain shortens fuzz minimization unless -fuzzminimizetime is given.
// Fuzz inputs here are disk images of a few KiB, mostly zeros; the
// default 60s minimizer removes byte ranges pairwise (quadratic in the
// input length) and, on each new input, would eat a whole -fuzztime 60s
// run before the fuzzer explores anything.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.fuzzminimizetime" })
	if !set {
		if err := flag.Set("test.fuzzminimizetime", "1s"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
