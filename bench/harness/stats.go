package harness

import (
	"math"
	"sort"
)

// Median of xs, the mean of the middle two for an even count; NaN when xs
// is empty. xs is not modified. Every report uses this one definition.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile by nearest rank (p in 0..100); NaN when xs is empty. With 200
// clients p99 is the second-slowest one, which is what an admin waiting for
// a rack to boot cares about.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// Versus compares two servers round by round: pairs holds their figures in
// the same round (x, y). Only rounds where both worked (neither NaN, y > 0)
// count.
type Versus struct {
	Ratio float64 // median of x/y over the counted rounds; NaN when none
	Wins  int     // rounds where x > y
	N     int     // rounds counted
	P     float64 // two-sided sign test: the chance of Wins this lopsided if x and y were equal
}

// Compare computes Versus over pairs. With 5 rounds even 5 wins gives
// p = 0.06: shared machines are noisy, so a report calls an edge only when
// p is small.
func Compare(pairs [][2]float64) Versus {
	var ratios []float64
	v := Versus{}
	for _, p := range pairs {
		x, y := p[0], p[1]
		if math.IsNaN(x) || math.IsNaN(y) || y <= 0 {
			continue
		}
		ratios = append(ratios, x/y)
		if x > y {
			v.Wins++
		}
	}
	v.N = len(ratios)
	v.Ratio = Median(ratios)
	v.P = SignTestP(v.Wins, v.N)
	return v
}

// SignTestP is the two-sided sign test's p for wins out of n coin tosses.
func SignTestP(wins, n int) float64 {
	if n == 0 {
		return 1
	}
	lo := min(wins, n-wins)
	tail, c := 0.0, 1.0
	for i := 0; i <= lo; i++ {
		if i > 0 {
			c = c * float64(n-i+1) / float64(i)
		}
		tail += c
	}
	return min(1, 2*tail/math.Pow(2, float64(n)))
}

// Rotate returns xs starting at its k-th element (mod len): each round of a
// bench starts with a different server, so machine noise hits all alike.
func Rotate[T any](xs []T, k int) []T {
	if len(xs) == 0 {
		return nil
	}
	k %= len(xs)
	return append(append([]T(nil), xs[k:]...), xs[:k]...)
}
