package imagestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// infoTimeout bounds `qemu-img info`, which reads only headers and
// tables: a damaged image that makes it loop or balloon is cut off
// instead of holding the upload forever. The conversion has no bound but
// the request's: a large image takes as long as it takes.
const infoTimeout = time.Minute

// convert turns the upload at src, of format f, into a sparse raw file in
// the temporary directory and returns its path. It removes src on every
// path, and the raw file on failure.
//
// Before converting, inspect asks `qemu-img info` which files the image
// needs and refuses an image that needs any but src: qemu-img would follow
// a backing file, an external data file or an extent to anywhere on the
// server's disks, and the server would serve what it found there.
// DetectFormat has refused what the header shows; this catches the rest
// (a VMDK's parentFileNameHint, for one).
func (s *Store) convert(ctx context.Context, src string, f Format) (string, error) {
	defer os.Remove(src)
	bin, err := exec.LookPath(s.qemuImg)
	if err != nil {
		return "", fmt.Errorf("%w: the upload is a %s image, which the server converts to raw with qemu-img; install it on the server (apt-get install qemu-utils), or convert the image yourself and upload the raw image (qemu-img convert -O raw IN OUT.raw)", ErrNoQemuImg, f)
	}
	size, err := inspect(ctx, bin, src, f)
	if err != nil {
		return "", err
	}
	out, err := os.CreateTemp(s.tmpDir(), "import-*.raw")
	if err != nil {
		return "", fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	out.Close()
	// -S 4k: blocks of zeros become holes, as in a raw upload.
	if _, err := runQemuImg(ctx, bin, src, "qemu-img cannot convert the "+f.String()+" image", nil, "convert", "-f", f.String(), "-O", "raw", "-S", "4k", src, out.Name()); err != nil {
		os.Remove(out.Name())
		return "", err
	}
	st, err := os.Stat(out.Name())
	if err == nil && st.Size() != size {
		err = fmt.Errorf("qemu-img convert wrote %d bytes, want the virtual size %d that qemu-img info gave", st.Size(), size)
	}
	if err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("imagestore: convert %s image: %w", f, err)
	}
	return out.Name(), nil
}

// inspect returns the virtual size of the image at src, of format f, and
// refuses one that names other files or is damaged.
func inspect(ctx context.Context, bin, src string, f Format) (int64, error) {
	ictx, cancel := context.WithTimeout(ctx, infoTimeout)
	doc, err := runQemuImg(ictx, bin, src, "qemu-img cannot read the "+f.String()+" image", nil, "info", "--output=json", "-f", f.String(), src)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(ictx.Err(), context.DeadlineExceeded) {
			return 0, refuse(ErrBadImage, "qemu-img info took longer than %v to read the %s image; it is damaged", infoTimeout, f)
		}
		return 0, err
	}
	size, err := checkInfo(doc, src, f)
	if err != nil {
		return 0, err
	}
	// A damaged or cut image converts to whatever its tables say, zeros
	// for what lies past its end; check refuses it instead. Exit code 3 is
	// leaked clusters only (harmless), 63 a format without checks.
	damaged := f.String() + " image is damaged (fetch it again, or repair a copy with qemu-img check -r all)"
	if _, err := runQemuImg(ctx, bin, src, damaged, []int{3, 63}, "check", "-f", f.String(), src); err != nil {
		return 0, err
	}
	return size, nil
}

// runQemuImg runs qemu-img and returns its standard output; exit codes
// in ok are success too. When it fails, the error is ErrBadImage saying
// what, then qemu-img's message: a damaged image is by far the commonest
// cause, and the message says so when it is not ("No space left on
// device").
func runQemuImg(ctx context.Context, bin, src, what string, ok []int, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) && slices.Contains(ok, exit.ExitCode()) {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("imagestore: qemu-img %s stopped: %w", args[0], ctx.Err())
	}
	msg := qemuMessage(stderr.String()+"\n"+stdout.String(), src)
	if msg == "" {
		msg = err.Error()
	}
	return nil, refuse(ErrBadImage, "%s: %s", what, msg)
}

// qemuMessage makes qemu-img's output one line of at most 6 of its lines,
// naming src "the upload" rather than by its temporary path.
func qemuMessage(out, src string) string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(out, src, "the upload"), "\n") {
		if l = strings.TrimSuffix(strings.TrimSpace(l), "."); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 6 {
		lines = append(lines[:6], "...")
	}
	msg := strings.Join(lines, "; ")
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	return msg
}

// qemuInfo is what the store reads of `qemu-img info --output=json`.
// Children is printed by qemu 8 and later; 7 prints extents and data-file
// under format-specific only.
type qemuInfo struct {
	Filename            string `json:"filename"`
	Format              string `json:"format"`
	VirtualSize         int64  `json:"virtual-size"`
	BackingFilename     string `json:"backing-filename"`
	FullBackingFilename string `json:"full-backing-filename"`
	FormatSpecific      struct {
		Data struct {
			DataFile string `json:"data-file"`
			Extents  []struct {
				Filename string `json:"filename"`
			} `json:"extents"`
		} `json:"data"`
	} `json:"format-specific"`
	Children []struct {
		Name string    `json:"name"`
		Info *qemuInfo `json:"info"`
	} `json:"children"`
}

// checkInfo reads qemu-img info's JSON about the image at path, of format
// f, and returns its virtual size; it refuses an image that needs any
// file but path.
func checkInfo(doc []byte, path string, f Format) (int64, error) {
	var info qemuInfo
	if err := json.Unmarshal(doc, &info); err != nil {
		return 0, fmt.Errorf("imagestore: qemu-img info printed no JSON the server understands (%w); install qemu-utils 5.0 or later", err)
	}
	if info.Format != f.String() {
		return 0, fmt.Errorf("imagestore: qemu-img info read the image as %q, want %q", info.Format, f)
	}
	if err := checkFiles(&info, path, f); err != nil {
		return 0, err
	}
	if info.VirtualSize <= 0 {
		return 0, refuse(ErrBadImage, "%s image has a virtual size of %d bytes; want a disk", f, info.VirtualSize)
	}
	return info.VirtualSize, nil
}

func checkFiles(info *qemuInfo, path string, f Format) error {
	external := func(what, name string) error {
		return refuse(ErrExternalFile, "%s image has %s (%.200q), which is not uploaded; convert it to one self-contained file first: qemu-img convert -O qcow2 IN OUT.qcow2", f, what, name)
	}
	switch {
	case info.BackingFilename != "":
		return external("a backing file", info.BackingFilename)
	case info.FullBackingFilename != "":
		return external("a backing file", info.FullBackingFilename)
	case info.FormatSpecific.Data.DataFile != "":
		return external("an external data file", info.FormatSpecific.Data.DataFile)
	case info.Filename != path:
		return external("its data in another file", info.Filename)
	}
	for _, e := range info.FormatSpecific.Data.Extents {
		if e.Filename != path {
			return external("an extent in another file", e.Filename)
		}
	}
	for _, c := range info.Children {
		if c.Info == nil {
			continue
		}
		if err := checkFiles(c.Info, path, f); err != nil {
			return err
		}
	}
	return nil
}
