package storm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strconv"
)

// ImageFetch is how a machine got one image its script loads.
type ImageFetch struct {
	Name string `json:"name"`
	// URL is the one the image came from, or the last one tried.
	URL string `json:"url"`
	// Via is the protocol that delivered it: http, mtftp, or tftp (a
	// tftp:// URL, or mtftp's own fallback); empty when every URL failed.
	Via string `json:"via,omitempty"`
	// Bytes is every payload byte received for it, failed URLs included;
	// MulticastBytes is the part that came from the MTFTP group.
	Bytes          int64 `json:"bytes"`
	MulticastBytes int64 `json:"multicast_bytes,omitempty"`
	// Fallbacks counts the script's URLs that failed before this one.
	Fallbacks int `json:"fallbacks,omitempty"`
	// MTFTP is what the mtftp:// URL's fetch did, when one was tried.
	MTFTP *MTFTPStats `json:"mtftp,omitempty"`
}

// fetchImage fetches img from its URL and, while that fails, from each
// of its alternates, as iPXE runs `kernel A || kernel B`. It returns the
// image that loaded (its Args are the command line that counts).
func (m *machine) fetchImage(ctx context.Context, f *fetcher, local netip.Addr, img Image) (Image, ImageFetch, error) {
	r := ImageFetch{Name: img.Name}
	var errs []error
	for i, alt := range append([]Image{img}, img.Alt...) {
		r.URL = alt.URL
		via, err := m.fetchURL(ctx, f, local, alt.URL, &r)
		if err == nil {
			r.Via, r.Fallbacks = via, i
			return alt, r, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	r.Fallbacks = len(errs)
	return img, r, errors.Join(errs...)
}

// fetchURL fetches one URL by its scheme, adding what it received to r,
// and returns the protocol that delivered it.
func (m *machine) fetchURL(ctx context.Context, f *fetcher, local netip.Addr, raw string, r *ImageFetch) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("image URL %q: %w", raw, err)
	}
	switch u.Scheme {
	case "http", "https":
		_, n, err := f.get(ctx, raw, 0)
		r.Bytes += n
		return "http", err
	case "tftp", "mtftp":
	default:
		return "", fmt.Errorf("%s: iPXE without %s:// support fails it", raw, u.Scheme)
	}
	server, err := urlServer(u)
	if err != nil {
		return "", err
	}
	if u.Scheme == "tftp" {
		n, err := plainTFTP(ctx, local, server, u.Path, io.Discard)
		r.Bytes += n
		return "tftp", err
	}
	g, err := m.cfg.hubs.mtftp()
	if err != nil {
		return "", err
	}
	n, st, err := g.get(ctx, mtftpGet{server: server, path: u.Path,
		open: func() (*net.UDPConn, error) {
			return net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
		},
		plain: func(ctx context.Context, path string, w io.Writer) (int64, error) {
			return plainTFTP(ctx, local, server, path, w)
		}})
	r.Bytes += n
	r.MulticastBytes += st.MulticastBytes
	r.MTFTP = &st
	if err != nil {
		return "", fmt.Errorf("%s: %w", raw, err)
	}
	if st.FellBack {
		return "tftp", nil
	}
	return "mtftp", nil
}

// urlServer is the IPv4 address and port a tftp:// or mtftp:// URL
// names: iPXE resolves names, the storm takes addresses only.
func urlServer(u *url.URL) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil || !a.Is4() {
		return netip.AddrPort{}, fmt.Errorf("%s: want an IPv4 address as host, got %q", u, u.Hostname())
	}
	port := uint64(69)
	if u.Scheme == "mtftp" {
		port = mtftpPort
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.ParseUint(p, 10, 16); err != nil {
			return netip.AddrPort{}, fmt.Errorf("%s: port %q: %w", u, p, err)
		}
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}
