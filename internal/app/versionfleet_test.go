package app

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// fleetSees bounds how long server B takes to boot what a write on A
// asks for. B reads the image's production version from the store at
// every script render, so a promote or rollback needs no wait; what
// does is a machine's new root channel, which reaches B's fleet view at
// its next reload (inventorysvc.Config.Refresh, 5 s on PostgreSQL), and
// version 2's content, which B fetches from A at the render that first
// needs it. Three reloads and a fetch of a 1 MiB layer on loopback fit
// well within it.
const fleetSees = 20 * time.Second

// TestTwoServersServeThePromotedVersion: two servers on one PostgreSQL
// store. Version 1 and a test version 2 are imported on A; a machine of
// B's following production reads version 1 over NBD from B, and one
// following test by its own root channel reads version 2. After a promote
// on A, B serves version 2 to both; after a rollback on A, version 1
// again to the production machine, and to the other once A pins it on 1.
func TestTwoServersServeThePromotedVersion(t *testing.T) {
	needTool(t, "nbdcopy")
	dsn := testutil.FreshPostgres(t)
	addrA, addrB := testutil.FreeAddr(t), testutil.FreeAddr(t)
	cA, cB := testConfig(t, addrA), testConfig(t, addrB)
	nbdB := testutil.FreeAddr(t)
	for i, c := range []*config.Config{cA, cB} {
		c.Store, c.Server.Name = dsn, fmt.Sprintf("server-%c", 'a'+i)
		linuxRoot(c, "ephemeral")
	}
	cB.NBD.Listen = nbdB
	startRun(t, cA)
	baseA, baseB := "http://"+addrA, "http://"+addrB
	call, _ := serverAPI(t, baseA, cA)

	v1 := make([]byte, 1<<20)
	rand.Read(v1) // never fails (crypto/rand)
	// Version 2 changes one 64 KiB block: it is stored, and crosses to
	// B, as a layer over version 1.
	v2 := bytes.Clone(v1)
	rand.Read(v2[128<<10 : 192<<10])
	call("PUT", "/api/v1/images/debian", bytes.NewReader(v1), http.StatusCreated)
	call("PUT", "/api/v1/images/debian?state=test", bytes.NewReader(v2), http.StatusOK)
	call("POST", "/api/v1/machines", bytes.NewReader([]byte(`{"mac":"52:54:00:00:00:02","profile":"linux","root_channel":"test"}`)), http.StatusCreated)

	startRun(t, cB)
	waitHTTP(t, baseB+"/api/v1/openapi.json")
	_, port, _ := net.SplitHostPort(nbdB)
	// serves waits until B serves mac the content of want over NBD, as
	// a booting machine reads it: the root its script names, from B.
	serves := func(mac, what string, want []byte) {
		t.Helper()
		wantSum := sha256.Sum256(want)
		testutil.Eventually(t, fleetSees, fmt.Sprintf("B serving %s to %s", what, mac), func() error {
			resp, err := http.Get(baseB + "/ipxe/" + mac)
			if err != nil {
				return err
			}
			script, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("script render: %s: %s", resp.Status, script)
			}
			m := rootArgRE.FindSubmatch(script)
			if m == nil || string(m[2]) != port {
				return fmt.Errorf("script names no root on B's NBD port %s:\n%s", port, script)
			}
			got, err := exec.Command("nbdcopy", "nbd://127.0.0.1:"+port+"/"+string(m[3]), "-").Output()
			if err != nil {
				return fmt.Errorf("nbdcopy from B: %w", err)
			}
			if sum := sha256.Sum256(got); sum != wantSum {
				return fmt.Errorf("B serves %d bytes of sha256 %.12s, want %s's %.12s", len(got), hex.EncodeToString(sum[:]), what, hex.EncodeToString(wantSum[:]))
			}
			return nil
		})
	}
	const prod, tester = "52-54-00-00-00-01", "52-54-00-00-00-02"
	serves(prod, "version 1", v1)
	serves(tester, "version 2 (own channel test)", v2)

	call("POST", "/api/v1/images/debian/versions/2/promote", nil, http.StatusOK)
	serves(prod, "version 2 after the promote on A", v2)
	serves(tester, "version 2 after the promote on A", v2)

	call("POST", "/api/v1/images/debian/rollback", nil, http.StatusOK)
	serves(prod, "version 1 after the rollback on A", v1)
	serves(tester, "version 2, back in test", v2)

	// A pin set on A reaches B's fleet view at its next reload.
	call("PATCH", "/api/v1/machines/52:54:00:00:00:02", bytes.NewReader([]byte(`{"root_channel":"1"}`)), http.StatusOK)
	serves(tester, "version 1, pinned on A", v1)
}
