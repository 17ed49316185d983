// Package app builds bootfleet's servers from a validated config and runs
// them together. The first fatal error from any server stops all of them,
// and Run returns that error.
package app
