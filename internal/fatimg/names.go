package fatimg

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
)

// FAT's epoch, 1980-01-01 00:00, as a FAT date; times are 0.
const epochDate = 1<<5 | 1

// validName accepts what FAT's long names can hold.
func validName(s string) error {
	if s == "." || s == ".." || len(utf16.Encode([]rune(s))) > 255 {
		return fmt.Errorf("name %q: want 1 to 255 characters, not . or ..", s)
	}
	for _, r := range s {
		if r < 0x20 || strings.ContainsRune(`"*/:<>?\|`, r) {
			return fmt.Errorf("name %q: %q is not allowed in a FAT name", s, r)
		}
	}
	return nil
}

// shortChar maps a character to its form in a short name, or 0 if a short
// name cannot hold it.
func shortChar(r rune) byte {
	switch {
	case r >= 'a' && r <= 'z':
		return byte(r - 'a' + 'A')
	case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("!#$%&'()-@^_`{}~", r):
		return byte(r)
	}
	return 0
}

// exactShort is the 8.3 name s is as it stands (upper case, fits), if any.
func exactShort(s string) ([11]byte, bool) {
	var out [11]byte
	for i := range out {
		out[i] = ' '
	}
	base, ext, _ := strings.Cut(s, ".")
	if len(base) == 0 || len(base) > 8 || len(ext) > 3 || strings.Contains(ext, ".") {
		return out, false
	}
	for i, r := range base {
		c := shortChar(r)
		if c == 0 || byte(r) != c {
			return out, false
		}
		out[i] = c
	}
	for i, r := range ext {
		c := shortChar(r)
		if c == 0 || byte(r) != c {
			return out, false
		}
		out[8+i] = c
	}
	return out, true
}

// basis is the short name of s with only its mappable characters, before
// a ~N tail makes it unique.
func basis(s string) (base, ext string) {
	keep := func(t string, n int) string {
		var b []byte
		for _, r := range t {
			if c := shortChar(r); c != 0 && len(b) < n {
				b = append(b, c)
			}
		}
		return string(b)
	}
	name, e := s, ""
	if i := strings.LastIndex(s, "."); i > 0 {
		name, e = s[:i], s[i+1:]
	}
	return keep(name, 8), keep(e, 3)
}

// shortNames gives each child of d a unique short name: its own if it is
// an upper-case 8.3 name, else a basis with a ~N tail (and a long name).
func shortNames(d *node) error {
	taken := map[[11]byte]bool{}
	var rest []*node
	for _, c := range d.children {
		if s, ok := exactShort(c.name); ok {
			c.short = s
			taken[s] = true
		} else {
			rest = append(rest, c)
		}
	}
	for _, c := range rest {
		base, ext := basis(c.name)
		if base == "" {
			base = "FILE"
		}
		found := false
		for n := 1; n < 1000000 && !found; n++ {
			tail := fmt.Sprintf("~%d", n)
			b := base
			if len(b)+len(tail) > 8 {
				b = b[:8-len(tail)]
			}
			var s [11]byte
			copy(s[:], fmt.Sprintf("%-8s%-3s", b+tail, ext))
			if !taken[s] {
				c.short, taken[s], found = s, true, true
			}
		}
		if !found {
			return fmt.Errorf("fatimg: %s: no free short name", pathOf(c))
		}
	}
	return nil
}

// lfnCount is how many long-name entries n needs: none for an upper-case
// 8.3 name, else one per 13 UTF-16 units.
func lfnCount(n *node) int {
	if _, ok := exactShort(n.name); ok {
		return 0
	}
	return (len(utf16.Encode([]rune(n.name))) + 12) / 13
}

func checksum(short [11]byte) byte {
	var sum byte
	for _, c := range short {
		sum = (sum>>1 | sum<<7) + c
	}
	return sum
}

// dirEntries is d's directory, padded with zeros to size bytes.
func (l *layout) dirEntries(d *node, size int) []byte {
	b := make([]byte, 0, size)
	if d.parent != nil {
		dot, dotdot := [11]byte{'.'}, [11]byte{'.', '.'}
		for i := 1; i < 11; i++ {
			dot[i] = ' '
			if i > 1 {
				dotdot[i] = ' '
			}
		}
		b = append(b, entry(dot, true, d.cluster, 0)...)
		b = append(b, entry(dotdot, true, d.parent.cluster, 0)...)
	}
	for _, c := range d.children {
		b = append(b, longEntries(c)...)
		b = append(b, entry(c.short, c.dir, c.cluster, c.size)...)
	}
	return append(b, make([]byte, size-len(b))...)
}

func entry(name [11]byte, dir bool, cluster uint32, size int64) []byte {
	e := make([]byte, entrySize)
	copy(e, name[:])
	e[11] = 0x20 // archive
	if dir {
		e[11] = 0x10
		size = 0
	}
	le := binary.LittleEndian
	le.PutUint16(e[16:], epochDate) // created
	le.PutUint16(e[18:], epochDate) // accessed
	le.PutUint16(e[24:], epochDate) // written
	le.PutUint16(e[26:], uint16(cluster))
	le.PutUint32(e[28:], uint32(size))
	return e
}

// longEntries are the VFAT entries of n's long name, last part first.
func longEntries(n *node) []byte {
	count := lfnCount(n)
	if count == 0 {
		return nil
	}
	units := utf16.Encode([]rune(n.name))
	if len(units)%13 != 0 {
		units = append(units, 0)
	}
	for len(units)%13 != 0 {
		units = append(units, 0xFFFF)
	}
	sum := checksum(n.short)
	le := binary.LittleEndian
	var b []byte
	for i := count; i >= 1; i-- {
		e := make([]byte, entrySize)
		e[0] = byte(i)
		if i == count {
			e[0] |= 0x40
		}
		e[11], e[13] = 0x0F, sum
		part := units[(i-1)*13 : i*13]
		for j, u := range part {
			var off int
			switch {
			case j < 5:
				off = 1 + 2*j
			case j < 11:
				off = 14 + 2*(j-5)
			default:
				off = 28 + 2*(j-11)
			}
			le.PutUint16(e[off:], u)
		}
		b = append(b, e...)
	}
	return b
}
