//go:build !linux

package mcast

// newSlab returns n zeroed bytes for a cache's slots.
func newSlab(_ *MemCache, n int) []byte { return make([]byte, n) }
