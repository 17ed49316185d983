package sqldb

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// DHCPv6 leases live in leases6, keyed by the DUID in lower-case hex; the
// MAC is '' when unknown and the address is in its canonical text form
// (RFC 5952), so the unique index on ip sees one address one way.

// ListLeases6 implements inventory.Leases6.
func (s *Store) ListLeases6(ctx context.Context) ([]inventory.Lease6, error) {
	rows, err := s.query(ctx, s.r, `SELECT duid, mac, ip, expiry FROM leases6`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.Lease6{}
	for rows.Next() {
		var (
			l              inventory.Lease6
			duid, mac, ip6 string
		)
		if err := rows.Scan(&duid, &mac, &ip6, scanTime{&l.Expiry}); err != nil {
			return nil, s.dbErr("read DHCPv6 lease", err)
		}
		d, derr := hex.DecodeString(duid)
		a, aerr := netip.ParseAddr(ip6)
		var merr error
		if mac != "" {
			l.MAC, merr = net.ParseMAC(mac)
		}
		if derr != nil || aerr != nil || merr != nil || !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("%s: stored DHCPv6 lease duid %q mac %q ip %q is damaged, want hex, a MAC or '', an IPv6 address; delete that row from leases6", s.d.Name, duid, mac, ip6)
		}
		l.DUID, l.IP = d, net.IP(a.AsSlice())
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := netip.AddrFromSlice(out[i].IP)
		b, _ := netip.AddrFromSlice(out[j].IP)
		return a.Less(b)
	})
	return out, s.rowsErr(rows)
}

// PutLease6 implements inventory.Leases6. Like PutLease it commits before
// returning.
func (s *Store) PutLease6(ctx context.Context, l inventory.Lease6) error {
	if err := l.Validate(); err != nil {
		return err
	}
	duid, ip6 := hex.EncodeToString(l.DUID), l.IP.String()
	mac := ""
	if l.MAC != nil {
		mac = l.MAC.String()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var holder string
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT duid FROM leases6 WHERE ip = ? AND duid <> ?`), ip6, duid).Scan(&holder)
		if err == nil {
			return inventory.Conflict("ip", "%s is leased to DUID %s; delete that lease first", ip6, holder)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return s.dbErr("read DHCPv6 lease", err)
		}
		_, err = s.exec(ctx, tx, `INSERT INTO leases6 (duid, mac, ip, expiry) VALUES (?, ?, ?, ?)
			ON CONFLICT (duid) DO UPDATE SET mac = excluded.mac, ip = excluded.ip, expiry = excluded.expiry`,
			duid, mac, ip6, s.d.timeArg(l.Expiry))
		return err
	})
}

// DeleteLease6 implements inventory.Leases6.
func (s *Store) DeleteLease6(ctx context.Context, duid []byte) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `DELETE FROM leases6 WHERE duid = ?`, hex.EncodeToString(duid))
		return err
	})
}
