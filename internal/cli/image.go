package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/imagestore"
)

func imageCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Import, list and remove root disk images for diskless machines (through the API of a running server)",
	}
	o.register(cmd)
	cmd.AddCommand(imageImportCmd(o), imageListCmd(o), imageRmCmd(o))
	cmd.AddCommand(imageVersionCmds(o)...)
	return cmd
}

// imageImportCmd uploads the file to the server (PUT /images/NAME), which
// stores it content-addressed in its data directory. Uploading rather than
// writing into the data directory works from any machine and leaves the
// server the only writer of its data directory. The server converts an
// image that is not raw; the file's format is read here too, so an image
// the server would refuse for naming other files is refused before a
// long upload.
func imageImportCmd(o *clientOpts) *cobra.Command {
	var test bool
	cmd := &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Import a disk image (raw, qcow2, VMDK, VHDX, VHD or VDI; told from its content) or a filesystem image (e.g. ext4) as a new version of NAME, in production (the next boots get it) unless --test",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			name, path := args[0], args[1]
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			if !st.Mode().IsRegular() {
				return fmt.Errorf("%s is a %v; want a regular file holding a disk or filesystem image", path, st.Mode().Type())
			}
			format, err := fileFormat(f)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			target := pathKey(name)
			if test {
				target += "?state=test"
			}
			img, pr, err := uploadImage(cmd, c, target, f, st.Size(), format)
			if err != nil {
				return err
			}
			if pr.n != st.Size() {
				return fmt.Errorf("sent %d bytes of %s, which has %d; it changed during the upload, import again", pr.n, path, st.Size())
			}
			// The server hashes what it serves: the upload itself only
			// when it is raw, the converted disk otherwise.
			stored := img.SHA256
			if img.Made != nil { // the version made; production may be another
				stored = img.Made.SHA256
			}
			if pr.sum != nil {
				if local := hex.EncodeToString(pr.sum.Sum(nil)); stored != local {
					return fmt.Errorf("server stored sha256 %s but the file hashes to %s; the upload was corrupted, import again", stored, local)
				}
			} else if img.Format != format.String() {
				return fmt.Errorf("the server stored the %s file as it is (it answered format %q): it predates image conversion; upgrade it, or import a raw image made with qemu-img convert -O raw %s OUT.raw", format, img.Format, path)
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), img)
			}
			how := ""
			if format != imagestore.Raw {
				how = fmt.Sprintf(" (converted from %s)", format)
			}
			if img.Made != nil {
				how += fmt.Sprintf(" as version %d, %s", img.Made.Version, img.Made.State)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported image %s%s\n", img.Name, how)
			return printImage(cmd.OutOrStdout(), img)
		},
	}
	cmd.Flags().BoolVar(&test, "test", false, "make the new version a test version: machines following the test channel boot it, production stays as it is")
	return cmd
}

// fileFormat reads the format of the image f holds and rewinds f.
func fileFormat(f *os.File) (imagestore.Format, error) {
	head := make([]byte, imagestore.HeaderSize)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return imagestore.Raw, err
	}
	format, err := imagestore.DetectFormat(head[:n])
	if err != nil {
		return format, err
	}
	_, err = f.Seek(0, io.SeekStart)
	return format, err
}

// uploadImage PUTs the size bytes of r as image name with a progress bar.
// An image the server converts says so once the bar is full, as the
// server answers only after converting it.
func uploadImage(cmd *cobra.Command, c *client, target string, r io.Reader, size int64, format imagestore.Format) (api.Image, *progress, error) {
	name, _, _ := strings.Cut(target, "?")
	pr := newProgress(cmd.ErrOrStderr(), "import "+name, size, r)
	if format == imagestore.Raw {
		pr.sum = sha256.New()
	} else {
		pr.then = func() { fmt.Fprintf(pr.w, "converting %s to raw on the server ...\n", format) }
	}
	var img api.Image
	err := c.upload(cmd.Context(), "/images/"+target, pr, size, &img)
	pr.end(err == nil)
	return img, pr, err
}

func printImage(w io.Writer, img api.Image) error {
	kv := [][2]string{{"name", img.Name}, {"sha256", img.SHA256}, {"size", sizeString(img.Size)}}
	if v := img.Made; v != nil { // the answer to an import: the version it made
		kv = [][2]string{{"name", img.Name}, {"version", fmt.Sprintf("%d (%s)", v.Version, v.State)}, {"sha256", v.SHA256},
			{"size", sizeString(v.Size)}}
	}
	if img.Format != "" { // the answer to an import
		kv = append(kv, [2]string{"allocated", sizeString(img.Allocated)}, [2]string{"format", img.Format})
	}
	return keyValues(w, append(kv, [2]string{"imported", formatTime(&img.Imported)}))
}

func imageListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List images and the servers of the fleet that hold each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var il api.ImageList
			if err := c.do(cmd.Context(), "GET", "/images", nil, &il); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), il.Images)
			}
			rows := make([][]string, 0, len(il.Images))
			for _, img := range il.Images {
				rows = append(rows, []string{img.Name, img.SHA256[:min(12, len(img.SHA256))], sizeString(img.Size), formatTime(&img.Imported),
					imageServers(img.Servers)})
			}
			return table(cmd.OutOrStdout(), []string{"NAME", "SHA256", "SIZE", "IMPORTED", "SERVERS"}, rows)
		},
	}
}

// imageServers is the SERVERS column: the servers holding the content,
// each not live with its status.
func imageServers(ss []api.ImageServer) string {
	if len(ss) == 0 {
		return "-"
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
		if s.Status != "live" {
			names[i] += " (" + s.Status + ")"
		}
	}
	return strings.Join(names, ", ")
}

func imageRmCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove an image no profile uses, from every server of the fleet; machines booted from it keep it until they reboot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", "/images/"+pathKey(args[0]), nil, nil); err != nil {
				return err
			}
			if o.output != "json" {
				fmt.Fprintf(cmd.OutOrStdout(), "removed image %s\n", args[0])
			}
			return nil
		},
	}
}

func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// progress reports an upload on w: a redrawn bar on a terminal, a line per
// 10% otherwise (logs, CI), so a long import never looks hung.
type progress struct {
	w          io.Writer
	label      string
	total, n   int64
	r          io.Reader
	sum        hash.Hash // hashes what is read, if set
	tty        bool
	lastDecile int64
	lastDraw   time.Time
	start      time.Time
	then       func() // called after the bar is full, if set
	once       sync.Once
}

func newProgress(w io.Writer, label string, total int64, r io.Reader) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, label: label, total: total, r: r, tty: tty, lastDecile: -1, start: time.Now()}
}

// Read reads on; the read that completes the upload ends the bar, since
// the answer may be long in coming (a conversion) and the bar must not
// look stuck meanwhile. The HTTP transport calls Read on a goroutine of
// its own: the state is done with when that read calls end, whose
// sync.Once makes the caller's end wait for it.
func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n == 0 {
		return n, err
	}
	if p.sum != nil {
		p.sum.Write(b[:n])
	}
	p.n += int64(n)
	if p.total > 0 && p.n >= p.total {
		p.end(true)
	} else {
		p.report(false)
	}
	return n, err
}

func (p *progress) percent() int64 {
	if p.total <= 0 {
		return 100
	}
	return p.n * 100 / p.total
}

func (p *progress) report(final bool) {
	pct := p.percent()
	if !p.tty {
		if d := pct / 10; d > p.lastDecile && (d > 0 || final) {
			p.lastDecile = d
			fmt.Fprintf(p.w, "%s: %d%% (%s of %s)\n", p.label, d*10, sizeString(p.n), sizeString(p.total))
		}
		return
	}
	if !final && time.Since(p.lastDraw) < 100*time.Millisecond {
		return
	}
	p.lastDraw = time.Now()
	const width = 30
	done := int(pct * width / 100)
	rate := float64(p.n) / max(time.Since(p.start).Seconds(), 1e-3) / (1 << 20)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%% %s/%s %.1f MiB/s ", p.label, strings.Repeat("#", done), strings.Repeat(" ", width-done),
		pct, sizeString(p.n), sizeString(p.total), rate)
}

// end ends the bar once: full (then calling then) when the upload went
// through, cut short otherwise.
func (p *progress) end(ok bool) {
	p.once.Do(func() {
		if ok {
			p.report(true)
		}
		if p.tty {
			fmt.Fprintln(p.w)
		}
		if ok && p.then != nil {
			p.then()
		}
	})
}

// upload PUTs body (size bytes, not JSON) and decodes the JSON answer. It
// has no overall timeout: a large image over a slow link takes as long as
// it takes.
func (c *client) upload(ctx context.Context, path string, body io.Reader, size int64, out any) error {
	return c.untimed(func() error { return c.send(ctx, http.MethodPut, path, body, size, "application/octet-stream", out) })
}

// untimed runs call without the client's overall timeout, for requests
// whose server side reads a whole image.
func (c *client) untimed(call func() error) error {
	hc := *c.http
	hc.Timeout = 0
	saved := c.http
	c.http = &hc
	defer func() { c.http = saved }()
	return call()
}
