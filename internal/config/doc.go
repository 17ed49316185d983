// Package config defines bootfleet's YAML configuration: its schema, its
// defaults and its validation. It is pure: it reads bytes and returns a
// validated Config or an error that names the key to fix. Looking up the
// network interface happens in package app, not here.
package config
