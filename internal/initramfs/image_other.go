//go:build !linux

package initramfs

import "errors"

type imageKernel struct {
	version, vmlinuz, modulesDir, fsType string
	close                                func() error
}

func openImageKernel(string) (*imageKernel, error) {
	return nil, errors.New("--image needs Linux: the image's root is mounted read-only to read its kernel")
}
