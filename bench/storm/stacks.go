package storm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
	"github.com/bootfleet/bootfleet/internal/ipxe"
)

// start runs stack fresh in dir and returns once every server answers.
func (b *bench) start(ctx context.Context, stack, dir string) ([]*harness.Proc, error) {
	if stack == "peer" {
		return b.startPeer(ctx, dir)
	}
	if stack == stackDropped {
		if err := dropGroups(ctx, true); err != nil {
			return nil, err
		}
	}
	p, err := b.startBootfleet(ctx, stack, dir)
	if err != nil {
		return nil, err
	}
	return []*harness.Proc{p}, nil
}

// The stacks: bootfleet with the root by unicast NBD, bootfleet with its
// multicast on (the default, mode auto), the same with every datagram to
// a group dropped on the server as a network without an IGMP querier
// would, and the peer.
const (
	stackUnicast   = "bootfleet"
	stackMulticast = "bootfleet-multicast"
	stackDropped   = "bootfleet-multicast-dropped"
	stackPeer      = "peer"
)

var stackNames = []string{stackUnicast, stackMulticast, stackDropped, stackPeer}

func multicastStack(stack string) bool { return stack == stackMulticast || stack == stackDropped }

// nft tables in the server's namespace: one marks the groups' datagrams
// for the link's paced class (harness.PaceClass) for every stack, as a
// real NIC's fair queue keeps a paced flow apart; the other drops them.
const (
	nftMark = "bfstorm-mark"
	nftDrop = "bfstorm-drop"
)

// markArgs are the nft commands that put the groups' datagrams in the
// paced class.
func markArgs() [][]string {
	return nftTable(nftMark, "meta priority set "+harness.PaceClass)
}

func nftTable(table, verdict string) [][]string {
	ns := []string{"ip", "netns", "exec", nsServer, "nft"}
	return [][]string{
		append(ns, "add", "table", "ip", table),
		append(ns, "add", "chain", "ip", table, "out", "{ type filter hook output priority 0; }"),
		append(ns, "add", "rule", "ip", table, "out", "ip", "daddr", "239.0.0.0/8", verdict),
	}
}

// dropGroups adds (on) or deletes the table that drops every datagram to
// a group on the server.
func dropGroups(ctx context.Context, on bool) error {
	if !on {
		return harness.Sh(ctx, "ip", "netns", "exec", nsServer, "nft", "delete", "table", "ip", nftDrop)
	}
	for _, a := range nftTable(nftDrop, "drop") {
		if err := harness.Sh(ctx, a[0], a[1:]...); err != nil {
			return fmt.Errorf("drop the groups: %w", err)
		}
	}
	return nil
}

// bootfleetConfig is the server's whole config: full DHCP, one profile
// with the kernel, the initrd and a diskless root on the image, ephemeral
// overlays as a lab runs them; multicast of the root's base off for the
// unicast stack, on (its default) for the others. multicast.mtftp is
// left at its default, auto: on where the mode is auto, so the multicast
// stacks name the kernel mtftp:// (the dropped one then shows what
// iPXE's fallback to plain TFTP costs) and the unicast one by HTTP.
func (b *bench) bootfleetConfig(stack, dir string) string {
	mode := "mode: off"
	if multicastStack(stack) {
		// Rate explicit: the server takes its default share of the speed
		// the interface reports, and the veth under the shaped link
		// reports 10 Gbit/s.
		mode = "mode: auto, rate: " + b.o.mcastRate
	}
	return fmt.Sprintf(`interface: %s
server_ip: %s
data: %s
dhcp: {mode: full, range: %s-%s, lease: 1h}
tftp: {listen: ":69"}
http: {listen: ":8080"}
ipxe: {dir: %s}
log: {level: warn}
multicast: {%s}
default_profile: lab
profiles:
  lab:
    kernel: %s
    initrd: [%s]
    cmdline: "quiet done={{ .DoneURL }}"
    root: {image: %s, overlay: ephemeral}
`, devServer, serverIP, filepath.Join(dir, "data"), rangeFirst, rangeLast, b.o.ipxeDir, mode,
		filepath.Join(b.o.work, "www", "vmlinuz"), filepath.Join(b.o.work, "www", "initrd.img"), imageName)
}

func (b *bench) startBootfleet(ctx context.Context, stack, dir string) (*harness.Proc, error) {
	cfg := filepath.Join(dir, "bootfleet.yaml")
	if err := os.WriteFile(cfg, []byte(b.bootfleetConfig(stack, dir)), 0o644); err != nil {
		return nil, err
	}
	p, err := harness.Start("storm-bootfleet", nsServer, filepath.Join(dir, "bootfleet.log"), nil,
		b.o.bootfleet, "serve", "--config", cfg)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(20*time.Second, b.httpReady("/metrics")); err != nil {
		p.Stop()
		return nil, err
	}
	if err := harness.Sh(ctx, "ip", "netns", "exec", nsServer, b.o.bootfleet, "image", "import", imageName, b.image,
		"--server", "http://"+serverIP+":8080", "--data", filepath.Join(dir, "data")); err != nil {
		p.Stop()
		return nil, fmt.Errorf("import the root image: %w", err)
	}
	return p, nil
}

// httpReady checks the server from the client's side of the link.
func (b *bench) httpReady(path string) func() error {
	return func() error {
		return harness.Sh(context.Background(), "ip", "netns", "exec", nsClient,
			"curl", "-sf", "-o", "/dev/null", "--max-time", "2", "http://"+serverIP+":8080"+path)
	}
}

// peerDnsmasq is ipxe.org's chainloading recipe for dnsmasq (PXE ROMs get
// ipxe.efi over TFTP, iPXE, which sends option 175, gets the script URL),
// given every advantage: no-ping (dnsmasq otherwise probes each new
// address for about 3 s), iPXE's no-pxedhcp setting (175.176), so iPXE
// does not wait for ProxyDHCP offers, and room for 1000 TFTP transfers at
// once (its default of 50 leaves the rest of a storm unanswered).
func (b *bench) peerDnsmasq(dir string) []string {
	return []string{"dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
		"--user=root", "--pid-file=",
		"--dhcp-leasefile=" + filepath.Join(dir, "dnsmasq.leases"),
		"--interface=" + devServer, "--bind-interfaces", "--no-ping",
		fmt.Sprintf("--dhcp-range=%s,%s,255.255.0.0,1h", rangeFirst, rangeLast),
		"--enable-tftp", "--tftp-root=" + b.o.ipxeDir, "--tftp-max=1000",
		"--dhcp-match=set:ipxe,175",
		"--dhcp-boot=tag:!ipxe,ipxe.efi",
		"--dhcp-boot=tag:ipxe,http://" + serverIP + ":8080/boot.ipxe",
		"--dhcp-option=encap:175,176,1b",
	}
}

// peerScript is the one script every machine gets: the web server cannot
// tell machines apart, and nbdkit serves one export to all, so there is
// no per-machine overlay.
func peerScript() string {
	base := "http://" + serverIP + ":8080/"
	return ipxe.Script(ipxe.Boot{
		Kernel:  base + "vmlinuz",
		Initrds: []ipxe.Initrd{{URL: base + "initrd.img"}},
		Cmdline: "quiet bootfleet.root=nbd:" + serverIP + ":10809:" + imageName + " done=" + base + "done",
	})
}

func (b *bench) startPeer(ctx context.Context, dir string) ([]*harness.Proc, error) {
	www := filepath.Join(b.o.work, "www")
	if err := os.WriteFile(filepath.Join(www, "boot.ipxe"), []byte(peerScript()), 0o644); err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(harness.NginxConf(prefix, serverIP+":8080", www)), 0o644); err != nil {
		return nil, err
	}
	var procs []*harness.Proc
	fail := func(err error) ([]*harness.Proc, error) {
		for _, p := range procs {
			p.Stop()
		}
		return nil, err
	}
	for _, s := range []struct {
		name  string
		argv  []string
		ready func() error
	}{
		{"storm-nginx", []string{"nginx", "-p", prefix, "-e", filepath.Join(prefix, "error.log"), "-c", conf}, b.httpReady("/done")},
		{"storm-nbdkit", []string{"nbdkit", "--foreground", "--readonly", "--ipaddr", serverIP, "--port", "10809", "file", b.image},
			func() error {
				return harness.Sh(ctx, "ip", "netns", "exec", nsClient, "nbdinfo", "--size", "nbd://"+serverIP+":10809/"+imageName)
			}},
		{"storm-dnsmasq", b.peerDnsmasq(dir), func() error { return udp67(ctx) }},
	} {
		p, err := harness.Start(s.name, nsServer, filepath.Join(dir, s.name+".log"), nil, s.argv...)
		if err != nil {
			return fail(err)
		}
		procs = append(procs, p)
		if err := p.WaitReady(20*time.Second, s.ready); err != nil {
			return fail(err)
		}
	}
	return procs, nil
}

// udp67 says whether something in the server namespace listens for DHCP.
func udp67(ctx context.Context) error {
	out, err := harness.Output(ctx, "ip", "netns", "exec", nsServer, "ss", "-Hlun", "sport", "=", ":67")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) == "" {
		return fmt.Errorf("nothing listens on UDP 67 yet")
	}
	return nil
}
