// Package imagestore keeps root disk images content-addressed in the data
// directory: DATA/images/sha256/<hex>. Content never changes once stored
// (files are read-only and named by their hash), so a machine that booted
// a version keeps reading exactly that version after the name moves on.
// Names live in the inventory (inventory.Images), not here.
package imagestore
