package nbd

import "strconv"

// Magic numbers (proto.md, "Handshake" and "Transmission").
const (
	magicNBD             uint64 = 0x4e42444d41474943 // "NBDMAGIC"
	magicIHaveOpt        uint64 = 0x49484156454F5054 // "IHAVEOPT"
	magicOptReply        uint64 = 0x0003e889045565a9
	magicRequest         uint32 = 0x25609513
	magicSimpleReply     uint32 = 0x67446698
	magicStructuredReply uint32 = 0x668e33ef
)

// HandshakeFlags are the 16 flag bits the server sends after IHAVEOPT.
type HandshakeFlags uint16

const (
	FlagFixedNewstyle HandshakeFlags = 1 << 0
	FlagNoZeroes      HandshakeFlags = 1 << 1
)

// ClientFlags are the 32 flag bits the client answers the greeting with.
type ClientFlags uint32

const (
	ClientFixedNewstyle ClientFlags = 1 << 0
	ClientNoZeroes      ClientFlags = 1 << 1
)

// TransmissionFlags describe an export and the commands it accepts.
type TransmissionFlags uint16

const (
	FlagHasFlags        TransmissionFlags = 1 << 0
	FlagReadOnly        TransmissionFlags = 1 << 1
	FlagSendFlush       TransmissionFlags = 1 << 2
	FlagSendFUA         TransmissionFlags = 1 << 3
	FlagRotational      TransmissionFlags = 1 << 4
	FlagSendTrim        TransmissionFlags = 1 << 5
	FlagSendWriteZeroes TransmissionFlags = 1 << 6
	FlagSendDF          TransmissionFlags = 1 << 7
	FlagCanMultiConn    TransmissionFlags = 1 << 8
)

// Option is an option type of the option haggling phase.
type Option uint32

const (
	OptExportName      Option = 1
	OptAbort           Option = 2
	OptList            Option = 3
	OptStartTLS        Option = 5
	OptInfo            Option = 6
	OptGo              Option = 7
	OptStructuredReply Option = 8
)

var optionNames = map[Option]string{
	OptExportName: "NBD_OPT_EXPORT_NAME", OptAbort: "NBD_OPT_ABORT", OptList: "NBD_OPT_LIST",
	OptStartTLS: "NBD_OPT_STARTTLS", OptInfo: "NBD_OPT_INFO", OptGo: "NBD_OPT_GO",
	OptStructuredReply: "NBD_OPT_STRUCTURED_REPLY",
}

func (o Option) String() string {
	if s, ok := optionNames[o]; ok {
		return s
	}
	return "NBD_OPT(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// ReplyType is the type of an option reply. Error types have bit 31 set.
type ReplyType uint32

const (
	RepAck            ReplyType = 1
	RepServer         ReplyType = 2
	RepInfo           ReplyType = 3
	RepErrUnsup       ReplyType = 1<<31 + 1
	RepErrPolicy      ReplyType = 1<<31 + 2
	RepErrInvalid     ReplyType = 1<<31 + 3
	RepErrPlatform    ReplyType = 1<<31 + 4
	RepErrTLSReqd     ReplyType = 1<<31 + 5
	RepErrUnknown     ReplyType = 1<<31 + 6
	RepErrShutdown    ReplyType = 1<<31 + 7
	RepErrBlockSizeRq ReplyType = 1<<31 + 8
)

// IsError reports whether t is one of the NBD_REP_ERR_* types.
func (t ReplyType) IsError() bool { return t&(1<<31) != 0 }

// InfoType is an NBD_INFO_* item of NBD_OPT_INFO and NBD_OPT_GO.
type InfoType uint16

const (
	InfoExport      InfoType = 0
	InfoName        InfoType = 1
	InfoDescription InfoType = 2
	InfoBlockSize   InfoType = 3
)

// Command is the type of a transmission request.
type Command uint16

const (
	CmdRead        Command = 0
	CmdWrite       Command = 1
	CmdDisc        Command = 2
	CmdFlush       Command = 3
	CmdTrim        Command = 4
	CmdCache       Command = 5
	CmdWriteZeroes Command = 6
	CmdBlockStatus Command = 7
)

var commandNames = map[Command]string{
	CmdRead: "READ", CmdWrite: "WRITE", CmdDisc: "DISC", CmdFlush: "FLUSH", CmdTrim: "TRIM",
	CmdCache: "CACHE", CmdWriteZeroes: "WRITE_ZEROES", CmdBlockStatus: "BLOCK_STATUS",
}

func (c Command) String() string {
	if s, ok := commandNames[c]; ok {
		return s
	}
	return "CMD(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// CmdFlags are the per-request command flags.
type CmdFlags uint16

const (
	CmdFlagFUA      CmdFlags = 1 << 0
	CmdFlagNoHole   CmdFlags = 1 << 1
	CmdFlagDF       CmdFlags = 1 << 2
	CmdFlagReqOne   CmdFlags = 1 << 3
	CmdFlagFastZero CmdFlags = 1 << 4
)

// ChunkType is the type of a structured reply chunk.
type ChunkType uint16

const (
	ChunkNone        ChunkType = 0
	ChunkOffsetData  ChunkType = 1
	ChunkOffsetHole  ChunkType = 2
	ChunkError       ChunkType = 1<<15 + 1
	ChunkErrorOffset ChunkType = 1<<15 + 2
)

// ReplyFlagDone marks the last chunk of a structured reply.
const ReplyFlagDone uint16 = 1 << 0

// Errno is an error value of a transmission reply. proto.md restricts it to
// the values below, which match Linux errno numbers.
type Errno uint32

const (
	EPERM     Errno = 1
	EIO       Errno = 5
	ENOMEM    Errno = 12
	EINVAL    Errno = 22
	ENOSPC    Errno = 28
	EOVERFLOW Errno = 75
	ESHUTDOWN Errno = 108
)

func (e Errno) String() string {
	switch e {
	case 0:
		return "OK"
	case EPERM:
		return "EPERM"
	case EIO:
		return "EIO"
	case ENOMEM:
		return "ENOMEM"
	case EINVAL:
		return "EINVAL"
	case ENOSPC:
		return "ENOSPC"
	case EOVERFLOW:
		return "EOVERFLOW"
	case ESHUTDOWN:
		return "ESHUTDOWN"
	}
	return "errno(" + strconv.FormatUint(uint64(e), 10) + ")"
}

// Limits. MaxStringLen is proto.md's bound on names and messages;
// MaxOptionLen bounds what the server buffers for one option.
const (
	MaxStringLen = 4096
	MaxOptionLen = 64 << 10
)
