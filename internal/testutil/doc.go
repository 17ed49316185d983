// Package testutil holds small helpers shared by the tests of several
// packages. Nothing in the product imports it.
package testutil
