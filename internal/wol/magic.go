package wol

import (
	"bytes"
	"errors"
	"fmt"
	"net"
)

// A magic packet, as AMD's "Magic Packet Technology" white paper (1995)
// and NIC SecureOn extensions define it. It is the UDP payload; NICs
// match it anywhere in a frame, but bootfleet sends nothing else.
//
//	 0                   6                                   102
//	+-------------------+-----------------------------------+----------------+
//	| FF FF FF FF FF FF | target MAC, 16 times (96 bytes)   | SecureOn (0/6) |
//	+-------------------+-----------------------------------+----------------+
//
// The SecureOn password is six bytes (some NICs take four); a NIC set up
// with one ignores packets that do not carry it.

// Port is the UDP port magic packets go to: 9 (discard), which every
// NIC's filter ignores and no host service answers.
const Port = 9

// Sizes of a magic packet.
const (
	syncLen  = 6
	repeats  = 16
	Size     = syncLen + repeats*6 // without a password: 102 bytes
	MaxSize  = Size + 6            // with a six-byte SecureOn password
	shortPwd = 4                   // the four-byte SecureOn some NICs use
)

// Errors Decode wraps.
var (
	ErrSize     = errors.New("wol: not a magic packet's size")
	ErrSync     = errors.New("wol: no sync stream of six FF bytes")
	ErrRepeat   = errors.New("wol: the MAC is not repeated 16 times")
	ErrPassword = errors.New("wol: SecureOn password must be 4 or 6 bytes")
	ErrMAC      = errors.New("wol: want a 6-byte Ethernet MAC")
)

// Packet is a decoded magic packet.
type Packet struct {
	MAC      net.HardwareAddr
	Password []byte // SecureOn; nil when absent
}

// Encode returns the magic packet that wakes mac, with the SecureOn
// password appended when password is non-empty (4 or 6 bytes).
func Encode(mac net.HardwareAddr, password []byte) ([]byte, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("%w, got %d bytes", ErrMAC, len(mac))
	}
	if n := len(password); n != 0 && n != shortPwd && n != 6 {
		return nil, fmt.Errorf("%w, got %d", ErrPassword, n)
	}
	b := make([]byte, 0, Size+len(password))
	b = append(b, bytes.Repeat([]byte{0xff}, syncLen)...)
	for range repeats {
		b = append(b, mac...)
	}
	return append(b, password...), nil
}

// Decode reads a UDP payload that must be exactly one magic packet, as a
// NIC standing in for a test would: 102 bytes, or 106 or 108 with a
// SecureOn password.
func Decode(b []byte) (Packet, error) {
	switch len(b) {
	case Size, Size + shortPwd, MaxSize:
	default:
		return Packet{}, fmt.Errorf("%w: got %d bytes, want %d, %d or %d", ErrSize, len(b), Size, Size+shortPwd, MaxSize)
	}
	for i := range syncLen {
		if b[i] != 0xff {
			return Packet{}, fmt.Errorf("%w: byte %d is %#02x", ErrSync, i, b[i])
		}
	}
	mac := b[syncLen : syncLen+6]
	for i := 1; i < repeats; i++ {
		at := syncLen + 6*i
		if !bytes.Equal(b[at:at+6], mac) {
			return Packet{}, fmt.Errorf("%w: copy %d is %s, copy 0 is %s", ErrRepeat, i, net.HardwareAddr(b[at:at+6]), net.HardwareAddr(mac))
		}
	}
	p := Packet{MAC: net.HardwareAddr(bytes.Clone(mac))}
	if len(b) > Size {
		p.Password = bytes.Clone(b[Size:])
	}
	return p, nil
}
