// Package postgres is the inventory store for fleets served by several
// bootfleet servers: one PostgreSQL database (`serve --store
// postgres://...`) shared by all of them, through jackc/pgx.
//
// Commits are durable with PostgreSQL's default synchronous_commit=on, so a
// lease is on disk when PutLease returns. Migrations take an advisory lock,
// so servers that start together migrate one after the other.
package postgres
