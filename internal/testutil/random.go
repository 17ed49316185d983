package testutil

import "math/rand/v2"

// RandomBytes is n bytes, the same for the same seed, so a failing test
// fails again with the same content.
func RandomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
