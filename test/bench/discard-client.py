"""A download client that costs the machine next to nothing, for the large-file rows of the bench.

On a two-core machine the clients share the cores with the server they measure. curl copies every
byte out of its socket (and the kernel's receive copy is most of a loopback client's cost), so
curl and the server under test split the cores, and a server that could use both never gets
them. This client asks the kernel to drop the body where it lies (recv with MSG_TRUNC: a TCP
socket then discards the bytes without copying them to the process), which is what a client on
another machine costs this one: nothing.

One process, one keep-alive connection: GET the path again and again until the deadline and
print, per response, "<status> <body bytes>" on stdout, flushed as it ends, so the caller counts
whole transfers only, by when their lines arrive. A response without Content-Length, or a connection
closed early, is a failure line "0 <bytes received>" and the end of the run.

    python3 discard-client.py HOST PORT PATH SECONDS
"""

import socket
import sys
import time

CHUNK = 4 * 1024 * 1024


def main() -> None:
    host, port, path, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    deadline = time.monotonic() + seconds
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: velodex-bench-discard\r\n\r\n".encode()
    sink = bytearray(CHUNK)
    view = memoryview(sink)
    out = sys.stdout
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while time.monotonic() < deadline:
            sock.sendall(request)
            head = b""
            while b"\r\n\r\n" not in head:
                # The head is small; peek first so no byte of the body is copied with it.
                got = sock.recv(65536, socket.MSG_PEEK)
                if not got:
                    print(f"0 {len(head)}", file=out, flush=True)
                    return
                end = (head + got).find(b"\r\n\r\n")
                take = len(got) if end < 0 else end + 4 - len(head)
                head += sock.recv(take)
            status, length = parse_head(head)
            if length is None:
                print("0 0", file=out, flush=True)
                return
            left = length
            while left > 0:
                n = sock.recv_into(view, min(left, CHUNK), socket.MSG_TRUNC)
                if n == 0:
                    break
                left -= n
            print(f"{status} {length - left}", file=out, flush=True)
            if left > 0:
                return


def parse_head(head: bytes) -> "tuple[int, int | None]":
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return status, int(value.strip())
    return status, None


if __name__ == "__main__":
    main()
