package agent

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFuzzSeeds writes testdata/fuzz/FuzzParseNetlink seeds (a family
// reply with multicast groups, a LINK_DEAD notification, an ACK) when
// UPDATE_TESTDATA=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("UPDATE_TESTDATA") != "1" {
		t.Skip("set UPDATE_TESTDATA=1 to rewrite the fuzz seeds")
	}
	group := func(id uint32, name string) attr {
		return attrNested(1, attrU32(ctrlAttrMcastID, id), attrString(ctrlAttrMcastName, name))
	}
	ack := genlMessage(nlmsgError, 0, 1, 0, 0)
	seeds := map[string][]byte{
		"family": genlMessage(genlIDCtrl, 0, 1, 1, 2, attrString(ctrlAttrFamilyName, "nbd"),
			attr{ctrlAttrFamilyID, binary.NativeEndian.AppendUint16(nil, 0x1b)},
			attrNested(ctrlAttrMcastGroups, group(7, nbdMcastGroup))),
		"linkdead": genlMessage(0x1b, 0, 0, nbdCmdLinkDead, 1, attrU32(nbdAttrIndex, 0)),
		"ack":      ack,
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseNetlink")
	os.MkdirAll(dir, 0o755)
	for name, b := range seeds {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
