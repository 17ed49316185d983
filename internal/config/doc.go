// Package config defines bootfleet's YAML configuration: its schema, its
// defaults and its validation. It is pure: it reads bytes and returns a
// validated Config or an error that names the key to fix. Looking up the
// network interface happens in package app, not here. The values a
// profile may take (loaders, overlay modes, root.kernel) belong to the
// inventory's model, which validation asks; the file's profiles and
// machines become inventory records in package inventorysvc.
package config
