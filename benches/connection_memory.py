#!/usr/bin/env python3
"""What an idle client connection costs a served broker in resident memory.

    python3 benches/connection_memory.py HOST:PORT PID COUNT [--tls CA.pem]

Opens COUNT connections to the broker listening at HOST:PORT (over TLS,
trusting the CA certificates of CA.pem, with --tls), sends one
ApiVersions (v3) on each and reads its answer, then keeps them all open
and idle. Prints the resident size (VmRSS) of the broker's process PID
before and two seconds after, and the difference per connection. Start
the broker with `broker-sim --serve --no-sim-traffic` (and --tls-cert,
--tls-key for TLS); the script needs COUNT file descriptors and Linux's
/proc.
"""

import argparse
import socket
import ssl
import time


def resident_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"process {pid}: no VmRSS in /proc/{pid}/status")


def api_versions():
    """An ApiVersions v3 request (header v2: client id "a"; body: software
    name "a", version "1"), with its size in front."""
    header = bytes([0, 18, 0, 3, 0, 0, 0, 1, 0, 1, ord("a"), 0])
    body = bytes([2, ord("a"), 2, ord("1"), 0])
    frame = header + body
    return len(frame).to_bytes(4, "big") + frame


def read_exactly(sock, n):
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise SystemExit("the broker closed a connection")
        got += chunk
    return got


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("address", help="HOST:PORT of a broker")
    p.add_argument("pid", type=int, help="the broker's process id")
    p.add_argument("count", type=int, help="how many connections")
    p.add_argument("--tls", metavar="CA", help="connect over TLS, trusting CA (PEM)")
    a = p.parse_args()
    host, port = a.address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=a.tls) if a.tls else None
    before = resident_kib(a.pid)
    held = []
    for _ in range(a.count):
        sock = socket.create_connection((host, int(port)))
        if context:
            sock = context.wrap_socket(sock, server_hostname=host)
        sock.sendall(api_versions())
        size = int.from_bytes(read_exactly(sock, 4), "big")
        read_exactly(sock, size)
        held.append(sock)
    time.sleep(2)
    after = resident_kib(a.pid)
    kind = "TLS" if context else "plaintext"
    print(f"{kind}: {a.count} connections, resident {before} -> {after} KiB, "
          f"{(after - before) * 1024 / a.count:.0f} bytes per connection")


if __name__ == "__main__":
    main()
