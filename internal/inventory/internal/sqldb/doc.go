// Package sqldb implements inventory.Store once, over database/sql, for
// both backends. A [Dialect] carries what differs between SQLite and
// PostgreSQL: placeholders, time columns and how unique-constraint
// violations are reported. It also runs the embedded schema migrations.
package sqldb
