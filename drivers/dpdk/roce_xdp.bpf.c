/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The XDP program of a netdev device's af_xdp port: RoCEv2 (UDP to port
 * 4791 over IPv4 or IPv6, untagged or under one 802.1Q/802.1ad tag) and
 * MAC control frames (PAUSE, PFC) go to uroce's AF_XDP socket of the
 * receive queue; everything else (ARP, neighbour discovery, ICMP, TCP,
 * other UDP, IPv4 fragments) passes to the kernel, which keeps the
 * interface. net_af_xdp loads it (xdp_prog devarg) and puts each of its
 * sockets in xsks_map at its queue's index.
 *
 * Built with clang -target bpf; the kernel's verifier checks every access
 * below against data_end.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define ROCE_V2_PORT 4791
#define ETH_P_MAC_CONTROL 0x8808

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct vlan_tag {
	__be16 tci;
	__be16 ether_type;
};

static __always_inline int is_roce_udp(const struct udphdr *udp, const void *end)
{
	if ((const void *)(udp + 1) > end)
		return 0;
	return udp->dest == bpf_htons(ROCE_V2_PORT);
}

static __always_inline int is_uroce_frame(const void *data, const void *end)
{
	const struct ethhdr *eth = data;
	const void *l3 = eth + 1;
	__be16 type;

	if (l3 > end)
		return 0;
	type = eth->h_proto;
	if (type == bpf_htons(ETH_P_8021Q) || type == bpf_htons(ETH_P_8021AD)) {
		const struct vlan_tag *tag = l3;

		if ((const void *)(tag + 1) > end)
			return 0;
		type = tag->ether_type;
		l3 = tag + 1;
	}
	if (type == bpf_htons(ETH_P_MAC_CONTROL))
		return 1;
	if (type == bpf_htons(ETH_P_IP)) {
		const struct iphdr *ip = l3;

		if ((const void *)(ip + 1) > end || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
			return 0;
		/* A fragment is the kernel's to reassemble; RoCE is never fragmented. */
		if (ip->frag_off & bpf_htons(0x3FFF))
			return 0;
		return is_roce_udp((const void *)ip + ip->ihl * 4, end);
	}
	if (type == bpf_htons(ETH_P_IPV6)) {
		const struct ipv6hdr *ip6 = l3;

		if ((const void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
			return 0;
		return is_roce_udp((const void *)(ip6 + 1), end);
	}
	return 0;
}

SEC("xdp")
int uroce_steer(struct xdp_md *ctx)
{
	const void *data = (const void *)(long)ctx->data;
	const void *end = (const void *)(long)ctx->data_end;

	if (!is_uroce_frame(data, end))
		return XDP_PASS;
	/* No socket on this queue (uroce not running): the kernel's. */
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "BSD";
