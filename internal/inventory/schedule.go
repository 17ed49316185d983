package inventory

import (
	"context"
	"time"
)

// ScheduleRuns lets exactly one server of a fleet run each firing of a
// power schedule: every server's scheduler fires, and the one whose
// claim the store takes first runs it.
type ScheduleRuns interface {
	// ClaimScheduleRun records that server runs schedule name's firing
	// due at at. It reports false when another server claimed it first.
	ClaimScheduleRun(ctx context.Context, name string, at time.Time, server string) (bool, error)
}
