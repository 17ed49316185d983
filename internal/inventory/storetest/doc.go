// Package storetest is the behaviour every inventory.Store must have,
// written once and run by each backend's tests (inventory/sqlite and
// inventory/postgres) through [Run].
package storetest
