package app

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestResetMigratesPersistentMachine: a persistent machine whose overlay
// was made on version 1 keeps booting 1 after 2 is promoted; a reset
// without --migrate is refused saying its writes are lost and where it
// would move; with it the machine boots version 2. A reset that moves
// nothing needs no --migrate.
func TestResetMigratesPersistentMachine(t *testing.T) {
	needTool(t, "nbdcopy")
	addr := testutil.FreeAddr(t)
	c := testConfig(t, addr)
	linuxRoot(c, "persistent")
	startRun(t, c)
	base := "http://" + addr
	call, tok := serverAPI(t, base, c)
	const mac = "52-54-00-00-00-01"
	// boots renders the machine's script and reads its whole root over
	// NBD, as its boot would: the first read makes the persistent overlay
	// on the content served.
	boots := func(what string, want []byte) {
		t.Helper()
		m := rootArgRE.FindStringSubmatch(string(call("GET", "/ipxe/"+mac, nil, http.StatusOK)))
		if m == nil {
			t.Fatalf("%s: the script names no NBD root", what)
		}
		got, err := exec.Command("nbdcopy", "nbd://127.0.0.1:"+m[2]+"/"+m[3], "-").Output()
		if err != nil {
			t.Fatalf("%s: nbdcopy: %v", what, err)
		}
		if sha256.Sum256(got) != sha256.Sum256(want) {
			t.Fatalf("%s: the machine reads other content", what)
		}
	}
	v1 := make([]byte, 1<<20)
	rand.Read(v1) // never fails (crypto/rand)
	v2 := bytes.Clone(v1)
	rand.Read(v2[:64<<10])
	call("PUT", "/api/v1/images/debian", bytes.NewReader(v1), http.StatusCreated)
	boots("first boot", v1)
	call("PUT", "/api/v1/images/debian?state=test", bytes.NewReader(v2), http.StatusOK)
	call("POST", "/api/v1/images/debian/versions/2/promote", nil, http.StatusOK)
	boots("after the promote", v1)

	var eb api.ErrorBody
	if err := json.Unmarshal(call("POST", "/api/v1/machines/"+mac+"/reset", nil, http.StatusConflict), &eb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"made on version 1 of image debian", "discards everything the machine wrote", "moves it to version 2", "--migrate"} {
		if eb.Field != "migrate" || !strings.Contains(eb.Error, want) {
			t.Fatalf("reset without --migrate refused with %+v, want field migrate and %q", eb, want)
		}
	}
	boots("after the refused reset", v1)

	// reset waits for the server to see nbdcopy's session end, as an
	// admin waits for the machine to shut down.
	reset := func(query string) (res api.ResetResult) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, "a reset once the NBD session is closed", func() error {
			req, _ := http.NewRequest("POST", base+"/api/v1/machines/"+mac+"/reset"+query, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", resp.Status, b)
			}
			return json.Unmarshal(b, &res)
		})
		return res
	}
	res := reset("?migrate=true")
	if mv := res.Migrated; mv == nil || *mv != (api.VersionMove{Image: "debian", From: 1, To: 2}) {
		t.Fatalf("reset with migrate answered %+v, want a move of debian from 1 to 2", res)
	}
	boots("after the migrating reset", v2)
	if res := reset(""); res.Migrated != nil {
		t.Fatalf("reset on the current version = %+v; want no move and no --migrate needed", res)
	}
	var ev api.EventList
	if err := json.Unmarshal(call("GET", "/api/v1/events?mac="+mac, nil, http.StatusOK), &ev); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ev.Events {
		found = found || (e.Kind == "machine.reset" && strings.Contains(e.Details, "moved from version 1 of image debian to version 2"))
	}
	if !found {
		t.Fatalf("events %+v, want a machine.reset saying the move", ev.Events)
	}
}
