package member

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// dnsPrefix marks a peer source resolved through DNS on every use, as the
// headless `<fleet>-peers` Service of a PersistentFleet is.
const dnsPrefix = "dns:"

// PeerSource says where the other members are: a fixed list of host:port
// addresses, or a DNS name whose A records are the members (port given).
type PeerSource struct {
	static  []string
	dnsName string
	dnsPort string
}

// ParsePeerSource reads "dns:NAME:PORT" or a comma-separated list of
// host:port addresses. The empty string means a member without peers.
func ParsePeerSource(s string) (PeerSource, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return PeerSource{}, nil
	}
	if rest, ok := strings.CutPrefix(s, dnsPrefix); ok {
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" {
			return PeerSource{}, fmt.Errorf("peer source %q: want dns:NAME:PORT: %v", s, err)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return PeerSource{}, fmt.Errorf("peer source %q: port %q is not a port number", s, port)
		}
		return PeerSource{dnsName: host, dnsPort: port}, nil
	}
	var src PeerSource
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if _, _, err := net.SplitHostPort(a); err != nil {
			return PeerSource{}, fmt.Errorf("peer address %q: want host:port: %w", a, err)
		}
		src.static = append(src.static, a)
	}
	return src, nil
}

// PeerSourceFromAdvertise derives the peer source from celld's advertise
// address `<node>.<fleet>-peers.<ns>.svc:<port>`: the headless Service name is
// everything after the first label. An IP (Bucket's advertise) has no peers
// Service, so it yields the empty source.
func PeerSourceFromAdvertise(advertise string) PeerSource {
	host, port, err := net.SplitHostPort(advertise)
	if err != nil || net.ParseIP(host) != nil {
		return PeerSource{}
	}
	_, svc, ok := strings.Cut(host, ".")
	if !ok || svc == "" {
		return PeerSource{}
	}
	return PeerSource{dnsName: svc, dnsPort: port}
}

// Empty reports whether the source names no peers at all.
func (p PeerSource) Empty() bool { return len(p.static) == 0 && p.dnsName == "" }

func (p PeerSource) String() string {
	if p.dnsName != "" {
		return dnsPrefix + net.JoinHostPort(p.dnsName, p.dnsPort)
	}
	return strings.Join(p.static, ",")
}

// resolve returns the peer addresses other than self. self is this member's
// own internal address as host:port; for DNS sources an address is self when
// its IP belongs to a local interface and its port is self's port.
func (p PeerSource) resolve(ctx context.Context, self string) ([]string, error) {
	var addrs []string
	if p.dnsName == "" {
		addrs = slices.Clone(p.static)
	} else {
		ips, err := net.DefaultResolver.LookupHost(ctx, p.dnsName)
		if err != nil {
			return nil, fmt.Errorf("resolve peers %s: %w", p.dnsName, err)
		}
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip, p.dnsPort))
		}
	}
	local := localIPs()
	_, selfPort, _ := net.SplitHostPort(self)
	out := addrs[:0]
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		if a == self || (port == selfPort && local[host]) {
			continue
		}
		out = append(out, a)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// localIPs is the set of this host's (Pod's) interface addresses.
func localIPs() map[string]bool {
	out := map[string]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out[n.IP.String()] = true
		}
	}
	return out
}
