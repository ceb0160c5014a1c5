#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks the ICRC of every RoCEv2 frame in a pcap file.

Written apart from lib/wire, on purpose: its own header walk and zlib's
CRC-32, so that a bug shared by uroce's builder and parser (which check
each other in the C++ tests) cannot pass here too. tshark 4.0 shows the
ICRC field but does not verify it.

The ICRC (IBA Annex A17.3.3, RoCEv2) is the CRC-32 of 8 bytes of 0xFF
standing in for the LRH, then the IP header, UDP header, BTH and the rest
of the packet up to the ICRC, with the fields a router may change masked
to ones: IPv4 type of service, TTL and header checksum; IPv6 traffic
class, flow label and hop limit; the UDP checksum; BTH byte 4 (FECN,
BECN, reserved). It is sent least significant byte first.

    icrc_check.py PCAP

Prints a line per frame whose ICRC is wrong, then
"icrc_check: N RoCEv2 frames, M bad ICRC, K other frames". Exits 0 if
every RoCEv2 frame is right, 1 if one is not, 2 if the file is not a
readable Ethernet pcap.
"""
import struct
import sys
import zlib

ROCEV2_PORT = 4791


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError("shorter than a pcap header")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError("not a pcap file (pcapng is not read here; dumpcap -P writes pcap)")
    (linktype,) = struct.unpack(endian + "I", data[20:24])
    if linktype != 1:
        raise ValueError(f"link type {linktype}, not Ethernet")
    at = 24
    number = 0
    while at + 16 <= len(data):
        _, _, incl, orig = struct.unpack(endian + "IIII", data[at : at + 16])
        at += 16
        number += 1
        yield number, data[at : at + incl], incl < orig
        at += incl


def check(frame):
    """None if the frame is not RoCEv2, else (stored ICRC, computed ICRC)."""
    if len(frame) < 14:
        return None
    l3 = 14
    ether_type = struct.unpack(">H", frame[12:14])[0]
    if ether_type == 0x8100:
        if len(frame) < 18:
            return None
        ether_type = struct.unpack(">H", frame[16:18])[0]
        l3 = 18
    if ether_type == 0x0800:
        if len(frame) < l3 + 20 or frame[l3] >> 4 != 4 or frame[l3 + 9] != 17:
            return None
        ihl = (frame[l3] & 0x0F) * 4
        end = l3 + struct.unpack(">H", frame[l3 + 2 : l3 + 4])[0]
        udp = l3 + ihl
    elif ether_type == 0x86DD:
        if len(frame) < l3 + 40 or frame[l3] >> 4 != 6 or frame[l3 + 6] != 17:
            return None
        end = l3 + 40 + struct.unpack(">H", frame[l3 + 4 : l3 + 6])[0]
        udp = l3 + 40
    else:
        return None
    if len(frame) < udp + 8 or struct.unpack(">H", frame[udp + 2 : udp + 4])[0] != ROCEV2_PORT:
        return None
    if end > len(frame) or end < udp + 8 + 12 + 4:
        return (None, None)  # says RoCEv2, but too short for a BTH and ICRC
    buf = bytearray(b"\xff" * 8) + frame[l3 : end - 4]
    ip = 8
    if ether_type == 0x0800:
        buf[ip + 1] = 0xFF  # type of service: DSCP and ECN
        buf[ip + 8] = 0xFF  # time to live
        buf[ip + 10 : ip + 12] = b"\xff\xff"  # header checksum
    else:
        buf[ip] |= 0x0F  # traffic class, high nibble
        buf[ip + 1 : ip + 4] = b"\xff\xff\xff"  # traffic class, low nibble; flow label
        buf[ip + 7] = 0xFF  # hop limit
    u = ip + (udp - l3)
    buf[u + 6 : u + 8] = b"\xff\xff"  # UDP checksum
    buf[u + 8 + 4] = 0xFF  # BTH: FECN, BECN, resv6
    stored = int.from_bytes(frame[end - 4 : end], "little")
    return stored, zlib.crc32(bytes(buf)) & 0xFFFFFFFF


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    roce = bad = other = 0
    try:
        for number, frame, truncated in frames(sys.argv[1]):
            result = check(frame)
            if result is None:
                other += 1
                continue
            roce += 1
            stored, computed = result
            if truncated or stored is None:
                bad += 1
                print(f"frame {number}: RoCEv2 but {'truncated' if truncated else 'too short'}")
            elif stored != computed:
                bad += 1
                print(f"frame {number}: ICRC {stored:#010x}, computed {computed:#010x}")
    except (OSError, ValueError) as e:
        print(f"icrc_check: {sys.argv[1]}: {e}")
        sys.exit(2)
    print(f"icrc_check: {roce} RoCEv2 frames, {bad} bad ICRC, {other} other frames")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
