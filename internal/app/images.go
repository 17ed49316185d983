package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/bootfleet/bootfleet/internal/diskless"
	"github.com/bootfleet/bootfleet/internal/imagepeer"
	"github.com/bootfleet/bootfleet/internal/images"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// peerSecretName is the store secret the servers sign image fetches with.
const peerSecretName = "image-peers"

// newImages makes this server's part of the fleet's images: the API
// imports and removes through it, it records what this server holds,
// fetches what it lacks from peers (dl asks before serving an image), and
// serves peers through the returned handler.
func newImages(ctx context.Context, store inventory.Store, name string, dl *diskless.Service, mergeDepth int, defaultProfile string, log *slog.Logger) (*images.Service, http.Handler, error) {
	fresh := make([]byte, 32)
	rand.Read(fresh)
	secret, err := store.Secret(ctx, peerSecretName, fresh)
	if err != nil {
		return nil, nil, fmt.Errorf("the fleet's key for image fetches between servers: %w", err)
	}
	imgs, err := images.New(images.Config{Self: name, Store: store, Blobs: dl.Blobs(), Boots: dl.Disks(), Kernels: dl.KernelFiles(), Edits: dl.Disks(), MergeDepth: mergeDepth, DefaultProfile: defaultProfile,
		Peers: &imagepeer.Client{Self: name, Secret: secret}, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	dl.SetFetcher(imgs)
	return imgs, imagepeer.Handler(imagepeer.HandlerConfig{Content: dl.Blobs(), Secret: secret, Logger: log}), nil
}

// withPeers serves the peer paths (imagepeer.Prefix) with peers, the
// agents' overlay blocks with blocks, contents' read orders with order,
// and the rest with boot: all go to
// every listener firmware reaches, which is where peers find each other
// (their registered http:// address) and agents their server.
func withPeers(boot, peers, blocks, order http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(imagepeer.Prefix, peers)
	mux.Handle("GET "+diskless.OverlayBlocksPath, blocks)
	mux.Handle("GET "+diskless.ReadOrderPath, order)
	mux.Handle("/", boot)
	return mux
}
