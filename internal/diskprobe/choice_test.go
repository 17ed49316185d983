package diskprobe

import (
	"strings"
	"testing"
)

func TestParseChoice(t *testing.T) {
	tests := []struct {
		in     string
		want   Choice
		errHas string
	}{
		{in: "2", want: Choice{Part: 2}},
		{in: "15", want: Choice{Part: 15}},
		{in: "PARTUUID=1234ABCD-05", want: Choice{PartUUID: "1234ABCD-05"}},
		{in: "partuuid=" + uuid1, want: Choice{PartUUID: uuid1}},
		{in: "LABEL=root", want: Choice{Label: "root"}},
		{in: "LABEL=a=b", want: Choice{Label: "a=b"}},
		{in: "", errHas: "is empty"},
		{in: "0", errHas: "want a partition number"},
		{in: "-1", errHas: "want a partition number"},
		{in: "+2", errHas: "want a partition number"},
		{in: "2a", errHas: "want a partition number"},
		{in: "99999999999999999999", errHas: "want a partition number"},
		{in: "/dev/sda2", errHas: "want a partition number"},
		{in: "UUID=" + uuid1, errHas: `unknown key "UUID"`},
		{in: "LABEL=", errHas: "empty value"},
		{in: "PARTUUID=", errHas: "empty value"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseChoice(tc.in)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "bootfleet.root.part") {
					t.Fatalf("ParseChoice(%q) = %+v, %v; want an error naming bootfleet.root.part and containing %q", tc.in, got, err, tc.errHas)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseChoice(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			back, err := ParseChoice(strings.TrimPrefix(got.String(), "bootfleet.root.part="))
			if err != nil || !strings.EqualFold(back.PartUUID, got.PartUUID) || back.Part != got.Part || back.Label != got.Label {
				t.Errorf("String() = %q does not parse back to %+v (got %+v, %v)", got.String(), got, back, err)
			}
		})
	}
	if s := (Choice{}).String(); s != "automatic" {
		t.Errorf("zero Choice String() = %q, want automatic", s)
	}
}
