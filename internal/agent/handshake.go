package agent

import (
	"errors"
	"fmt"
	"io"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// ExportInfo is what the handshake learned about the export: what the
// kernel needs for NBD_CMD_CONNECT.
type ExportInfo struct {
	Size  uint64
	Flags nbd.TransmissionFlags
	// MinBlock and PreferredBlock are from NBD_INFO_BLOCK_SIZE; 0 when the
	// server did not send it (NBD_OPT_EXPORT_NAME, or an old server).
	MinBlock, PreferredBlock uint32
}

// KernelBlockSize is the logical block size to give the kernel: the
// server's minimum, but at least 512 (the kernel's smallest) and at most
// 4096 (its largest, PAGE_SIZE on x86). It is not the preferred size: a
// 4096-byte logical block would make file systems with 1 KiB blocks (mkfs.ext4
// picks those for small images) unmountable.
func (e ExportInfo) KernelBlockSize() uint64 {
	return uint64(min(max(e.MinBlock, 512), 4096))
}

// maxReplyData bounds one option reply the client buffers; replies to GO
// are a few dozen bytes, so anything larger is a broken server.
const maxReplyData = 64 << 10

// ErrNotNewstyle is returned for servers without the fixed newstyle flag;
// the kernel client needs it (and every maintained server has it).
var ErrNotNewstyle = errors.New("server does not offer the fixed newstyle handshake")

// Handshake runs the client side of the fixed newstyle handshake on rw and
// leaves it in the transmission phase for export name, ready to hand to the
// kernel. It asks with NBD_OPT_GO (and NBD_INFO_BLOCK_SIZE) and falls back
// to NBD_OPT_EXPORT_NAME when the server answers NBD_REP_ERR_UNSUP. It never
// negotiates structured replies: the kernel's NBD client reads simple replies
// only. rw should have a deadline; Handshake does not set one.
func Handshake(rw io.ReadWriter, export string) (ExportInfo, error) {
	var hdr [nbd.OptionReplyHeaderLen]byte
	if _, err := io.ReadFull(rw, hdr[:nbd.GreetingLen]); err != nil {
		return ExportInfo{}, fmt.Errorf("nbd handshake: read greeting: %w", err)
	}
	hf, err := nbd.ParseGreeting(hdr[:nbd.GreetingLen])
	if err != nil {
		return ExportInfo{}, fmt.Errorf("nbd handshake: %w", err)
	}
	if hf&nbd.FlagFixedNewstyle == 0 {
		return ExportInfo{}, fmt.Errorf("nbd handshake: got handshake flags %#x: %w", uint16(hf), ErrNotNewstyle)
	}
	cf := nbd.ClientFixedNewstyle
	noZeroes := hf&nbd.FlagNoZeroes != 0
	if noZeroes {
		cf |= nbd.ClientNoZeroes
	}
	req := []byte{byte(cf >> 24), byte(cf >> 16), byte(cf >> 8), byte(cf)}
	req = nbd.AppendOption(req, nbd.OptGo, nbd.AppendInfoRequest(nil, nbd.InfoRequest{
		Name: export, Infos: []nbd.InfoType{nbd.InfoBlockSize},
	}))
	if _, err := rw.Write(req); err != nil {
		return ExportInfo{}, fmt.Errorf("nbd handshake: send NBD_OPT_GO: %w", err)
	}

	var info ExportInfo
	gotExport := false
	for range 64 { // a GO reply is a handful of INFOs and one ACK
		rh, data, err := readOptionReply(rw, hdr[:])
		if err != nil {
			return ExportInfo{}, err
		}
		if rh.Option != nbd.OptGo {
			return ExportInfo{}, fmt.Errorf("nbd handshake: got a reply to %v, want one to NBD_OPT_GO", rh.Option)
		}
		switch {
		case rh.Type == nbd.RepInfo:
			in, err := nbd.ParseInfo(data)
			if err != nil {
				return ExportInfo{}, fmt.Errorf("nbd handshake: %w", err)
			}
			switch in.Type {
			case nbd.InfoExport:
				info.Size, info.Flags, gotExport = in.Size, in.Flags, true
			case nbd.InfoBlockSize:
				info.MinBlock, info.PreferredBlock = in.MinBlock, in.PreferredBlock
			}
		case rh.Type == nbd.RepAck:
			if !gotExport {
				return ExportInfo{}, errors.New("nbd handshake: server acknowledged NBD_OPT_GO without NBD_INFO_EXPORT (size and flags)")
			}
			return info, nil
		case rh.Type == nbd.RepErrUnsup:
			return exportName(rw, export, noZeroes)
		case rh.Type.IsError():
			return ExportInfo{}, fmt.Errorf("nbd handshake: server refused export: reply type %#x %q (is the export name from this boot's script? bootfleet issues a new one per boot)", uint32(rh.Type), data)
		}
	}
	return ExportInfo{}, errors.New("nbd handshake: more than 64 replies to NBD_OPT_GO without an ACK")
}

// exportName is the old way to pick an export, for servers without GO.
func exportName(rw io.ReadWriter, export string, noZeroes bool) (ExportInfo, error) {
	if _, err := rw.Write(nbd.AppendOption(nil, nbd.OptExportName, []byte(export))); err != nil {
		return ExportInfo{}, fmt.Errorf("nbd handshake: send NBD_OPT_EXPORT_NAME: %w", err)
	}
	n := 10 + 124
	if noZeroes {
		n = 10
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rw, b); err != nil {
		// The server closes the connection for an unknown name.
		return ExportInfo{}, fmt.Errorf("nbd handshake: NBD_OPT_EXPORT_NAME: server closed or failed (unknown export?): %w", err)
	}
	size, flags, err := nbd.ParseExportNameReply(b)
	if err != nil {
		return ExportInfo{}, fmt.Errorf("nbd handshake: %w", err)
	}
	return ExportInfo{Size: size, Flags: flags}, nil
}

func readOptionReply(r io.Reader, hdr []byte) (nbd.OptionReplyHeader, []byte, error) {
	if _, err := io.ReadFull(r, hdr[:nbd.OptionReplyHeaderLen]); err != nil {
		return nbd.OptionReplyHeader{}, nil, fmt.Errorf("nbd handshake: read option reply: %w", err)
	}
	rh, err := nbd.ParseOptionReplyHeader(hdr)
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
