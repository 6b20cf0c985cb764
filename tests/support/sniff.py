"""Captures the TCP payload to or from one port on one interface: ``python -m tests.support.sniff IFACE PORT OUT``.

An AF_PACKET socket (root) reads every IPv4 frame of the interface, in and out; each TCP segment with ``PORT`` at
either end has its payload appended to ``OUT``. Prints ``capturing`` when ready; stops on SIGTERM.
"""

from __future__ import annotations

import signal
import socket
import struct
import sys


def main(iface: str, port: int, out: str) -> None:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))  # both ways (ETH_P_ALL)
    sock.bind((iface, 0))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("capturing", flush=True)
    with open(out, "ab") as sink:
        while True:
            frame = sock.recv(65535)
            if frame[12:14] != b"\x08\x00":  # IPv4 only
                continue
            ip = frame[14:]
            if len(ip) < 20 or ip[9] != 6:  # TCP only
                continue
            tcp = ip[(ip[0] & 0x0F) * 4 :]
            src, dst = struct.unpack("!HH", tcp[:4])
            if port in (src, dst):
                sink.write(tcp[(tcp[12] >> 4) * 4 :])
                sink.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
