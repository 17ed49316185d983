package nbd

import (
	"errors"
	"fmt"
	"io"
)

// Negotiated is what the client's handshake learned about the export:
// what a client (the Linux kernel's, through bootfleet-agent) needs to
// start the transmission phase.
type Negotiated struct {
	Size  uint64
	Flags TransmissionFlags
	// MinBlock and PreferredBlock are from NBD_INFO_BLOCK_SIZE; 0 when the
	// server did not send it (NBD_OPT_EXPORT_NAME, or an old server).
	MinBlock, PreferredBlock uint32
}

// maxReplyData bounds one option reply the client buffers; replies to GO
// are a few dozen bytes, so anything larger is a broken server.
const maxReplyData = 64 << 10

// ErrNotNewstyle is returned for servers without the fixed newstyle flag;
// the kernel client needs it (and every maintained server has it).
var ErrNotNewstyle = errors.New("server does not offer the fixed newstyle handshake")

// ClientHandshake runs the client side of the fixed newstyle handshake on rw and
// leaves it in the transmission phase for export name, ready to hand to the
// kernel. It asks with NBD_OPT_GO (and NBD_INFO_BLOCK_SIZE) and falls back
// to NBD_OPT_EXPORT_NAME when the server answers NBD_REP_ERR_UNSUP. It never
// negotiates structured replies: the kernel's NBD client reads simple replies
// only. rw should have a deadline; ClientHandshake does not set one.
func ClientHandshake(rw io.ReadWriter, export string) (Negotiated, error) {
	var hdr [OptionReplyHeaderLen]byte
	if _, err := io.ReadFull(rw, hdr[:GreetingLen]); err != nil {
		return Negotiated{}, fmt.Errorf("nbd handshake: read greeting: %w", err)
	}
	hf, err := ParseGreeting(hdr[:GreetingLen])
	if err != nil {
		return Negotiated{}, fmt.Errorf("nbd handshake: %w", err)
	}
	if hf&FlagFixedNewstyle == 0 {
		return Negotiated{}, fmt.Errorf("nbd handshake: got handshake flags %#x: %w", uint16(hf), ErrNotNewstyle)
	}
	cf := ClientFixedNewstyle
	noZeroes := hf&FlagNoZeroes != 0
	if noZeroes {
		cf |= ClientNoZeroes
	}
	req := []byte{byte(cf >> 24), byte(cf >> 16), byte(cf >> 8), byte(cf)}
	req = AppendOption(req, OptGo, AppendInfoRequest(nil, InfoRequest{
		Name: export, Infos: []InfoType{InfoBlockSize},
	}))
	if _, err := rw.Write(req); err != nil {
		return Negotiated{}, fmt.Errorf("nbd handshake: send NBD_OPT_GO: %w", err)
	}

	var info Negotiated
	gotExport := false
	for range 64 { // a GO reply is a handful of INFOs and one ACK
		rh, data, err := readOptionReply(rw, hdr[:])
		if err != nil {
			return Negotiated{}, err
		}
		if rh.Option != OptGo {
			return Negotiated{}, fmt.Errorf("nbd handshake: got a reply to %v, want one to NBD_OPT_GO", rh.Option)
		}
		switch {
		case rh.Type == RepInfo:
			in, err := ParseInfo(data)
			if err != nil {
				return Negotiated{}, fmt.Errorf("nbd handshake: %w", err)
			}
			switch in.Type {
			case InfoExport:
				info.Size, info.Flags, gotExport = in.Size, in.Flags, true
			case InfoBlockSize:
				info.MinBlock, info.PreferredBlock = in.MinBlock, in.PreferredBlock
			}
		case rh.Type == RepAck:
			if !gotExport {
				return Negotiated{}, errors.New("nbd handshake: server acknowledged NBD_OPT_GO without NBD_INFO_EXPORT (size and flags)")
			}
			return info, nil
		case rh.Type == RepErrUnsup:
			return clientExportName(rw, export, noZeroes)
		case rh.Type.IsError():
			return Negotiated{}, fmt.Errorf("nbd handshake: server refused export: reply type %#x %q (is the export name from this boot's script? bootfleet issues a new one per boot)", uint32(rh.Type), data)
		}
	}
	return Negotiated{}, errors.New("nbd handshake: more than 64 replies to NBD_OPT_GO without an ACK")
}

// clientExportName is the old way to pick an export, for servers without GO.
func clientExportName(rw io.ReadWriter, export string, noZeroes bool) (Negotiated, error) {
	if _, err := rw.Write(AppendOption(nil, OptExportName, []byte(export))); err != nil {
		return Negotiated{}, fmt.Errorf("nbd handshake: send NBD_OPT_EXPORT_NAME: %w", err)
	}
	n := 10 + 124
	if noZeroes {
		n = 10
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rw, b); err != nil {
		// The server closes the connection for an unknown name.
		return Negotiated{}, fmt.Errorf("nbd handshake: NBD_OPT_EXPORT_NAME: server closed or failed (unknown export?): %w", err)
	}
	size, flags, err := ParseExportNameReply(b)
	if err != nil {
		return Negotiated{}, fmt.Errorf("nbd handshake: %w", err)
	}
	return Negotiated{Size: size, Flags: flags}, nil
}

func readOptionReply(r io.Reader, hdr []byte) (OptionReplyHeader, []byte, error) {
	if _, err := io.ReadFull(r, hdr[:OptionReplyHeaderLen]); err != nil {
		return OptionReplyHeader{}, nil, fmt.Errorf("nbd handshake: read option reply: %w", err)
	}
	rh, err := ParseOptionReplyHeader(hdr)
	if err != nil {
		return rh, nil, fmt.Errorf("nbd handshake: %w", err)
	}
	if rh.Length > maxReplyData {
		return rh, nil, fmt.Errorf("nbd handshake: option reply of %d bytes, want at most %d", rh.Length, maxReplyData)
	}
	data := make([]byte, rh.Length)
	if _, err := io.ReadFull(r, data); err != nil {
		return rh, nil, fmt.Errorf("nbd handshake: read option reply data: %w", err)
	}
	return rh, data, nil
}
