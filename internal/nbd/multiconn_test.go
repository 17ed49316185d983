package nbd

import "testing"

func TestMultiConnFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		info ExportInfo
		want bool
	}{
		{"read-only", ExportInfo{Size: 4096, ReadOnly: true}, true},
		{"writable", ExportInfo{Size: 4096}, false},
		{"writable, one storage object for all connections", ExportInfo{Size: 4096, MultiConn: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := &session{}
			got := ss.transmissionFlags(tc.info)&FlagCanMultiConn != 0
			if got != tc.want {
				t.Fatalf("CAN_MULTI_CONN: got %v, want %v (flags %#x)", got, tc.want, ss.transmissionFlags(tc.info))
			}
		})
	}
}
