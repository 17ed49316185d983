package storm

import (
	"os"

	"github.com/bootfleet/bootfleet/internal/uki"
)

// ukiFile is the report's name for the UKI the multicast stacks' server
// builds UEFI machines from the profile's kernel and initrd, which they
// take by MTFTP in place of both.
const ukiFile = "boot.efi"

// ukiSize is the size of the UKI the server builds of stub, kernel and
// initrd (internal/uki is its builder too); an error when the stub is
// missing or the kernel is no EFI-stub kernel, and the server builds none.
func ukiSize(stub, kernel, initrd string) (int64, error) {
	var img uki.Image
	for _, f := range []struct {
		path string
		blob *uki.Blob
	}{{stub, &img.Stub}, {kernel, &img.Kernel}} {
		fh, err := os.Open(f.path)
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		st, err := fh.Stat()
		if err != nil {
			return 0, err
		}
		*f.blob = uki.Blob{R: fh, Size: st.Size()}
	}
	st, err := os.Stat(initrd)
	if err != nil {
		return 0, err
	}
	img.Initrds = []uki.Blob{{Size: st.Size()}}
	return uki.Size(img)
}
