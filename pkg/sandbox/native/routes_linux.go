//go:build linux && (amd64 || arm64)

package native

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// Netlink constants of <linux/rtnetlink.h> that package syscall lacks.
const (
	rtnUnreachable = 7   // RTN_UNREACHABLE: the destination answers "no route"
	rtTableMain    = 254 // RT_TABLE_MAIN
	rtProtStatic   = 4   // RTPROT_STATIC
)

// unreachableRoutes adds, to the network namespace the calling process is
// in (a sandbox's, before its route out exists), an "unreachable" route
// for each prefix: a connection to one of them fails at once with
// EHOSTUNREACH, whatever default route comes later, since a longer prefix
// wins. An IPv6 prefix in a namespace without IPv6 is skipped: nothing
// there can reach it. Errors: a prefix that does not parse, or one the
// kernel refused.
func unreachableRoutes(prefixes []string) error {
	if len(prefixes) == 0 {
		return nil
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind the netlink socket: %w", err)
	}
	for i, s := range prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("unreachable address %q: %w", s, err)
		}
		err = addUnreachable(fd, uint32(i+1), p.Masked())
		if p.Addr().Is6() && (errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EOPNOTSUPP)) {
			continue
		}
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("add an unreachable route to %s: %w", p, err)
		}
	}
	return nil
}

// addUnreachable sends one RTM_NEWROUTE of type RTN_UNREACHABLE for p and
// reads the kernel's acknowledgement.
func addUnreachable(fd int, seq uint32, p netip.Prefix) error {
	family, addr := syscall.AF_INET, p.Addr().AsSlice()
	if p.Addr().Is6() {
		family = syscall.AF_INET6
	}
	attrLen := syscall.SizeofRtAttr + len(addr)
	msgLen := syscall.NLMSG_HDRLEN + syscall.SizeofRtMsg + rtaAlign(attrLen)
	b := make([]byte, msgLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(msgLen))
	ne.PutUint16(b[4:], syscall.RTM_NEWROUTE)
	ne.PutUint16(b[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK|syscall.NLM_F_CREATE|syscall.NLM_F_EXCL)
	ne.PutUint32(b[8:], seq)
	rt := b[syscall.NLMSG_HDRLEN:]
	rt[0] = byte(family)   // rtm_family
	rt[1] = byte(p.Bits()) // rtm_dst_len
	rt[4] = rtTableMain    // rtm_table
	rt[5] = rtProtStatic   // rtm_protocol
	rt[6] = syscall.RT_SCOPE_UNIVERSE
	rt[7] = rtnUnreachable // rtm_type
	attr := rt[syscall.SizeofRtMsg:]
	ne.PutUint16(attr[0:], uint16(attrLen))
	ne.PutUint16(attr[2:], syscall.RTA_DST)
	copy(attr[syscall.SizeofRtAttr:], addr)
	if err := syscall.Sendto(fd, b, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	ack := make([]byte, 4096)
	n, _, err := syscall.Recvfrom(fd, ack, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(ack[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(ne.Uint32(m.Data[0:4])); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
	}
	return errors.New("no acknowledgement from the kernel")
}

func rtaAlign(n int) int { return (n + syscall.RTA_ALIGNTO - 1) &^ (syscall.RTA_ALIGNTO - 1) }

// unreachablePrefixes returns the prefixes every sandbox routes nowhere:
// those of extra, each an address or a prefix. Loopback addresses are left
// out: inside a sandbox they name its own loopback, and slirp4netns already
// refuses the host's. Errors: an entry of extra that is neither.
func unreachablePrefixes(extra []string) ([]string, error) {
	var out []string
	seen := map[netip.Prefix]bool{}
	add := func(p netip.Prefix) {
		if p = p.Masked(); !seen[p] {
			seen[p] = true
			out = append(out, p.String())
		}
	}
	for _, s := range extra {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("native sandbox: unreachable address %q is neither an IP address nor a prefix", s)
			}
			ip = ip.Unmap()
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		// A loopback address names the sandbox's own loopback inside it,
		// which is the command's to use; the host's is out of reach already.
		if p.Addr().Unmap().IsLoopback() {
			continue
		}
		add(p)
	}
	return out, nil
}
