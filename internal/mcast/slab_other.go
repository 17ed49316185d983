//go:build !linux

package mcast

// newSlab returns n zeroed bytes for a cache's slots.
func newSlab[T any](_ *T, n int) []byte { return make([]byte, n) }
