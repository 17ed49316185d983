package storm

import "testing"

func TestMACFor(t *testing.T) {
	tests := []struct {
		prefix  string
		i       int
		want    string
		wantErr bool
	}{
		{DefaultMACPrefix, 0, "02:bf:57:00:00:01", false},
		{DefaultMACPrefix, 255, "02:bf:57:00:01:00", false},
		{"0a", 0x01020304, "0a:00:01:02:03:05", false},
		{"02:00:00:00:00", 254, "02:00:00:00:00:ff", false},
		{"02:00:00:00:00", 255, "", true}, // one byte left holds 1..255
		{"00:11:22", 0, "", true},         // universally administered
		{"03", 0, "", true},               // multicast
		{"02:00:00:00:00:00", 0, "", true},
		{"zz", 0, "", true},
		{"", 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+"/"+tt.want, func(t *testing.T) {
			got, err := MACFor(tt.prefix, tt.i)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && got.String() != tt.want {
				t.Fatalf("got %v, want %s", got, tt.want)
			}
		})
	}
}
