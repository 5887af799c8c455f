package segment

import "testing"

func TestIsLogFile(t *testing.T) {
	for _, c := range []struct {
		dir, name string
		want      bool
	}{
		{"", "00000000000000000000.log", true},
		{"", "00000000000000004096.index", true},
		{"", "0000000000000000409.index", false},
		{"", "00000000000000000000.logx", false},
		{"", "purge.gen", false},
		{"", "partition.state", false},
		{"offsets/consumers", "17", true},
		{"offsets/groups", "4294967295", true},
		{"offsets/groups", "4294967296", false},
		{"offsets/consumers", "README", false},
		{"offsets", "17", false},
	} {
		if got := IsLogFile(c.dir, c.name); got != c.want {
			t.Errorf("IsLogFile(%q, %q) = %v, want %v", c.dir, c.name, got, c.want)
		}
	}
}
