// Package schedule runs the config's power schedules: at the times each
// cron expression names, it powers a profile's machines (or some, or all)
// on, off or reboots them, in waves, through a power.Runner. Each firing
// is claimed in the inventory, so a fleet runs it once; each run goes to
// the audit trail and to /metrics.
package schedule
