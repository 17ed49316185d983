package images

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagepeer"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// Store is what a Service reads and writes in the fleet's store: the
// names, the copies, and the servers holding them.
type Store interface {
	inventory.Images
	inventory.ImageVersions
	inventory.ImageCopies
	ListServers(ctx context.Context) ([]inventory.ServerInfo, error)
	ListProfiles(ctx context.Context) ([]inventory.Profile, error)
	ListMachines(ctx context.Context, f inventory.MachineFilter) ([]inventory.Machine, error)
}

// Blobs is this server's image content; *imagestore.Store implements it.
type Blobs interface {
	Has(sha string) bool
	List() ([]string, error)
	// ImportContext stores an upload; see imagestore.Store.ImportContext.
	ImportContext(ctx context.Context, r io.Reader) (imagestore.Imported, error)
	// PutCopy stores content copied from a peer, r starting at byte
	// from; see imagestore.Store.PutCopy.
	PutCopy(ctx context.Context, r io.Reader, from int64, sha string, size int64) (imagestore.Imported, error)
	// Partial is how many bytes of sha a copy that stopped early kept.
	Partial(sha string) int64
	// ImportOver stores an upload as a layer over content parent when
	// that saves space; see imagestore.Store.ImportOver.
	ImportOver(ctx context.Context, r io.Reader, parent string) (imagestore.Imported, error)
	// StoreLayer stores a maintenance version's disk as a layer over
	// parent; see imagestore.Store.StoreLayer.
	StoreLayer(ctx context.Context, content io.ReaderAt, size int64, parent string) (imagestore.Imported, error)
	// Chain and Merge see and flatten a content's layers; see
	// imagestore.Store.Merge.
	Chain(sha string) (imagestore.Chain, error)
	Merge(ctx context.Context, sha string, progress func(done, total int64)) (imagestore.Imported, error)
	// PutLayerCopy stores a peer's layer of content sha over parent,
	// checked by its sha256; see imagestore.Store.PutLayerCopy.
	PutLayerCopy(ctx context.Context, r io.Reader, sha, parent string, size int64) (imagestore.Imported, error)
	Remove(sha string) error
}

// Boots is what the machines of this server boot from; *rootdisk.Manager
// implements it.
type Boots interface {
	// InUse reports whether a machine boots from content sha: a boot
	// issued on it, a connected machine, or a persistent overlay made on
	// it. When none does and drop is not nil, drop runs before InUse
	// returns, with new boots of sha held off, so content drop deletes is
	// never promised to a machine; the error is drop's.
	InUse(sha string, drop func() error) (bool, error)
	// Users lists the machines reading content sha, for listings.
	Users(sha string) []rootdisk.Use
}

// Kernels are the boot files built from image content;
// *imagekernel.Builder implements it.
type Kernels interface {
	// Remove deletes the files built from content sha, if any.
	Remove(sha string) error
}

// Peers opens transfers from peers; *imagepeer.Client implements it.
type Peers interface {
	Open(ctx context.Context, base, sha string, from int64) (*imagepeer.Body, error)
}

// Config configures a Service.
type Config struct {
	Self  string // this server's name in the fleet; required
	Store Store  // required
	Blobs Blobs  // required
	Boots Boots  // required
	Peers Peers  // required
	// Kernels, if set, loses the files built from content as it goes.
	Kernels Kernels
	// DefaultProfile is the profile of machines that name none (config
	// default_profile), so a machine's own root channel is listed
	// against the image that profile boots.
	DefaultProfile string
	// Edits, if set, holds the writes of maintenance versions (image
	// edit); without it, edits are refused.
	Edits Edits
	// MergeDepth is how many layers deep a version may be stored here
	// before a check merges it into a whole file (config
	// nbd.merge_depth). Default 5, as reads cost a little more per
	// layer; negative never merges by itself.
	MergeDepth int
	// Interval between checks of the store: new images to fetch, removed
	// ones to delete. Default 10 s.
	Interval time.Duration
	// Fetches bounds the background fetches at once. Default 2, range 1
	// to 2: a copy competes with boots for the disk and the link.
	Fetches int
	// Grace is how long content imported here is kept even though no
	// image names it yet: Import stores the content before it records the
	// name, and a check may read the names in between. (A fetch is always
	// of named content.) Default 1 min.
	Grace time.Duration
	// Retry is how long a background fetch that failed waits before it
	// is tried again, doubled at each failure in a row up to 16 times
	// Retry, so an image only a dead server holds costs a log line every
	// quarter hour, not every minute. Default 1 min.
	Retry  time.Duration
	Now    func() time.Time // default time.Now
	Logger *slog.Logger     // default: discard
}

// Service is this server's part in keeping the fleet's images: the API
// imports and removes through it, boots ensure content through it. Create
// it with New, run Run in the server's errgroup.
type Service struct {
	cfg Config
	log *slog.Logger
	// ctx outlives each caller of Ensure: a fetch goes on for the next
	// boot when the machine that asked for it gives up. Run cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	bg     chan struct{} // background fetch slots
	// rows serializes writes of this server's image_copies rows: record
	// replaces them all from a listing of the image store, so an import
	// or a delete between that listing and its write would be undone.
	rows sync.Mutex

	mu      sync.Mutex
	flights map[string]*flight   // fetches in progress, by sha
	arrived map[string]time.Time // content imported lately, for Grace
	// named is when a fetch last read the images and found the content
	// named: a check whose own read is older must not delete the copy.
	named  map[string]time.Time
	failed map[string]retry // background fetches that failed
	kept   map[string]bool  // content logged as kept while machines use it
	// known is content this store's fleet has had: named by an image at a
	// check, arrived here, or recorded as this server's before it
	// started. Only known content is deleted when no image names it, so
	// a server pointed at another store by mistake keeps its images.
	known     map[string]bool
	merges    map[string]*Merge  // by image
	commits   map[string]*Commit // by image: the last commit of each, running or ended
	recorded  bool               // this server's copies are in the store
	storeDown bool               // a store read or write failed and was logged
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Service, error) {
	if cfg.Self == "" || cfg.Store == nil || cfg.Blobs == nil || cfg.Boots == nil || cfg.Peers == nil {
		return nil, errors.New("images: Config.Self, Store, Blobs, Boots and Peers are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	cfg.Fetches = max(1, min(cfg.Fetches, 2))
	if cfg.Grace <= 0 {
		cfg.Grace = time.Minute
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Minute
	}
	if cfg.MergeDepth == 0 {
		cfg.MergeDepth = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, log: cfg.Logger, bg: make(chan struct{}, cfg.Fetches),
		flights: map[string]*flight{}, arrived: map[string]time.Time{}, named: map[string]time.Time{}, failed: map[string]retry{},
		kept: map[string]bool{}, known: map[string]bool{}, merges: map[string]*Merge{}, commits: map[string]*Commit{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Run checks the store every Interval until ctx is done, then stops the
// fetches in progress (their temporary files are removed) and returns
// nil: a store that cannot be read only delays copies, never boots from
// what is here.
func (s *Service) Run(ctx context.Context) error {
	defer s.wg.Wait()
	defer s.cancel()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.Check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check does one round: records this server's copies if it has not yet,
// reads the images, starts background fetches of named
// content missing here and deletes local content no image names.
func (s *Service) Check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(s.cfg.Interval, 10*time.Second))
	defer cancel()
	if !s.isRecorded() {
		s.record(ctx)
	}
	listed := s.cfg.Now()
	imgs, err := s.contents(ctx)
	if err != nil {
		s.warn(ctx, "image copies: reading the images failed; checking again every interval, logged again once it works", err)
		return
	}
	s.mu.Lock()
	back := s.storeDown
	s.storeDown = false
	s.mu.Unlock()
	if back {
		s.log.Info("image copies: the store answers again")
	}
	named := map[string]inventory.Image{}
	s.mu.Lock()
	for _, img := range imgs {
		named[img.SHA256] = img
		s.known[img.SHA256] = true
	}
	s.mu.Unlock()
	for _, img := range imgs {
		if !s.cfg.Blobs.Has(img.SHA256) {
			s.background(img)
		}
	}
	s.autoMerge(imgs)
	local, err := s.cfg.Blobs.List()
	if err != nil {
		s.log.Warn("image copies: listing the image store failed", "err", err)
		return
	}
	for _, sha := range local {
		if _, ok := named[sha]; !ok && s.isKnown(sha) && !s.fresh(sha, listed) {
			s.drop(sha)
		}
	}
}

// record replaces this server's rows with what its image store holds,
// first noting as known the content the rows held before.
func (s *Service) record(ctx context.Context) {
	s.rows.Lock()
	defer s.rows.Unlock()
	before, err := s.cfg.Store.ListImageCopies(ctx)
	if err != nil {
		s.warn(ctx, "image copies: reading the copies failed; trying again at the next check", err)
		return
	}
	s.mu.Lock()
	for _, c := range before {
		if c.Server == s.cfg.Self {
			s.known[c.SHA256] = true
		}
	}
	s.mu.Unlock()
	local, err := s.cfg.Blobs.List()
	if err != nil {
		s.log.Warn("image copies: listing the image store failed", "err", err)
		return
	}
	now := s.cfg.Now()
	copies := make([]inventory.ImageCopy, 0, len(local))
	for _, sha := range local {
		copies = append(copies, inventory.ImageCopy{Server: s.cfg.Self, SHA256: sha, Since: now})
	}
	if err := s.cfg.Store.SetImageCopies(ctx, s.cfg.Self, copies); err != nil {
		s.warn(ctx, "image copies: recording what this server holds failed; trying again at the next check", err)
		return
	}
	s.mu.Lock()
	s.recorded = true
	s.mu.Unlock()
	s.log.Info("image copies: recorded what this server holds", "server", s.cfg.Self, "contents", len(copies))
}

func (s *Service) isKnown(sha string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known[sha]
}

func (s *Service) isRecorded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recorded
}

// fresh reports whether sha was imported within Grace, or fetched by a
// fetch that read the images when or after the check did at listed.
func (s *Service) fresh(sha string, listed time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seen, ok := s.named[sha]; ok && !seen.Before(listed) {
		return true
	}
	at, ok := s.arrived[sha]
	if ok && s.cfg.Now().Sub(at) >= s.cfg.Grace {
		delete(s.arrived, sha)
		return false
	}
	return ok
}

// warn logs a failed store read or write, once until a check reads the
// store again: an unreachable database would otherwise cost a line every
// Interval.
func (s *Service) warn(ctx context.Context, msg string, err error) {
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	first := !s.storeDown
	s.storeDown = true
	s.mu.Unlock()
	if first {
		s.log.Warn(msg, "err", err)
	}
}
