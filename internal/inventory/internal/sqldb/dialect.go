package sqldb

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dialect is what one database engine does its own way.
type Dialect struct {
	// Name is "sqlite" or "postgres", for messages.
	Name string
	// Numbered is true when placeholders are $1, $2 (PostgreSQL) rather
	// than ? (SQLite). Queries are written with ? and rebound.
	Numbered bool
	// TimeArg converts a non-zero time to the value a time column takes.
	TimeArg func(time.Time) any
	// Violation classifies a constraint error: kind is "unique" or
	// "foreign", column the column at fault when known ("mac", "name",
	// "ip"). ok is false for any other error.
	Violation func(err error) (kind, column string, ok bool)
	// MigrationLock, when set, is run first in the migration transaction so
	// that several servers starting at once migrate one after the other.
	MigrationLock string
}

func (d *Dialect) rebind(q string) string {
	if !d.Numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (d *Dialect) timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return d.TimeArg(t)
}

// UnixMicro is the SQLite TimeArg: integer microseconds since 1970, which
// sort and compare correctly and survive any client.
func UnixMicro(t time.Time) any { return t.UnixMicro() }

// scanTime reads a time column stored either as integer microseconds
// (SQLite) or as a timestamp (PostgreSQL). NULL reads as the zero time.
type scanTime struct{ t *time.Time }

func (s scanTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*s.t = time.Time{}
	case int64:
		*s.t = time.UnixMicro(x).UTC()
	case time.Time:
		*s.t = x.UTC()
	default:
		return fmt.Errorf("time column: got %T, want an integer or a timestamp", v)
	}
	return nil
}
