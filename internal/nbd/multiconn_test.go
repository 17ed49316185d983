package nbd

import "testing"

type multiConnExport struct {
	*memExport
	shared bool
}

func (m multiConnExport) MultiConn() bool { return m.shared }

func TestMultiConnFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Export
		want bool
	}{
		{"read-only", &memExport{b: make([]byte, 4096), ro: true}, true},
		{"writable", &memExport{b: make([]byte, 4096)}, false},
		{"writable, one storage object for all connections", multiConnExport{&memExport{b: make([]byte, 4096)}, true}, true},
		{"writable, says not shared", multiConnExport{&memExport{b: make([]byte, 4096)}, false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := &session{}
			got := ss.transmissionFlags(tc.e)&FlagCanMultiConn != 0
			if got != tc.want {
				t.Fatalf("CAN_MULTI_CONN: got %v, want %v (flags %#x)", got, tc.want, ss.transmissionFlags(tc.e))
			}
		})
	}
}
