// Package cli holds bootfleet's cobra commands. Each command parses its
// flags and hands over to the package that does the work; `serve` hands a
// validated config to app.Run.
package cli
