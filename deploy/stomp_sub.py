#!/usr/bin/env python3
"""A minimal STOMP 1.2 subscriber on a raw socket, for smoke tests on a build or a Pi.

It needs nothing beyond the Python standard library: CONNECT, SUBSCRIBE to `/topic/<topic>`
with a receipt, wait for the RECEIPT (so the subscription is known to be in place before
anyone publishes), print "subscribed" on stdout, then wait for one MESSAGE and compare its
body byte for byte with the expected payload.

    stomp_sub.py --port 61613 --topic sensors/t1 --expect-file payload.bin

Exit status: 0 when the body matched, 1 on a mismatch, an ERROR frame or a time-out.
"""

import argparse
import socket
import sys
import time


class StompError(Exception):
    """The broker answered with an ERROR frame, closed the socket, or was too slow."""


class FrameReader:
    """Reads STOMP frames (STOMP 1.2, "Augmented BNF"): heart-beat EOLs between frames are
    skipped, a body is `content-length` bytes when the header is there, else up to the NUL."""

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.deadline = deadline
        self.buf = b""

    def _fill(self):
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise StompError("timed out waiting for a frame")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout as e:
            raise StompError("timed out waiting for a frame") from e
        if not chunk:
            raise StompError(f"the broker closed the connection (unparsed: {self.buf[:200]!r})")
        self.buf += chunk

    def frame(self):
        while True:
            self.buf = self.buf.lstrip(b"\r\n")
            end = self.buf.find(b"\n\n")
            crlf = self.buf.find(b"\r\n\r\n")
            if crlf != -1 and (end == -1 or crlf < end):
                head, body_at = self.buf[:crlf], crlf + 4
                break
            if end != -1:
                head, body_at = self.buf[:end], end + 2
                break
            self._fill()
        lines = head.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
        command, headers = lines[0], {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(name, value)  # STOMP 1.2: the first occurrence wins
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(self.buf) < body_at + length + 1:
                self._fill()
            body = self.buf[body_at : body_at + length]
            if self.buf[body_at + length : body_at + length + 1] != b"\0":
                raise StompError(f"{command} frame: no NUL after content-length {length}")
            self.buf = self.buf[body_at + length + 1 :]
        else:
            while (nul := self.buf.find(b"\0", body_at)) == -1:
                self._fill()
            body = self.buf[body_at:nul]
            self.buf = self.buf[nul + 1 :]
        if command == "ERROR":
            raise StompError(f"ERROR frame: {headers} {body[:500]!r}")
        return command, headers, body


def expect(reader: FrameReader, command: str):
    got, headers, body = reader.frame()
    if got != command:
        raise StompError(f"expected {command}, got {got} {headers} {body[:200]!r}")
    return headers, body


def subscribe_and_receive(host, port, topic, expected: bytes, timeout: float, ready=None) -> bytes:
    """Subscribes, calls `ready()` once the RECEIPT is in, and returns the first MESSAGE body."""
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, port), timeout=timeout) as sock:
        reader = FrameReader(sock, deadline)
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:0,0\n\n\0")
        expect(reader, "CONNECTED")
        destination = f"/topic/{topic}"
        sock.sendall(
            f"SUBSCRIBE\nid:0\ndestination:{destination}\nack:auto\nreceipt:sub-0\n\n".encode() + b"\0"
        )
        headers, _ = expect(reader, "RECEIPT")
        if headers.get("receipt-id") != "sub-0":
            raise StompError(f"RECEIPT for {headers.get('receipt-id')!r}, expected 'sub-0'")
        if ready:
            ready()
        headers, body = expect(reader, "MESSAGE")
        if headers.get("subscription") != "0":
            raise StompError(f"MESSAGE for subscription {headers.get('subscription')!r}, expected '0'")
        try:
            sock.sendall(b"DISCONNECT\n\n\0")
        except OSError:
            pass
        return body


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=61613)
    parser.add_argument("--topic", required=True, help="canonical (MQTT-style) topic, without /topic/")
    parser.add_argument("--expect-file", required=True, help="file holding the expected body")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    with open(args.expect_file, "rb") as f:
        expected = f.read()

    def ready():
        print("subscribed", flush=True)

    try:
        body = subscribe_and_receive(args.host, args.port, args.topic, expected, args.timeout, ready)
    except (StompError, OSError) as e:
        print(f"stomp_sub: {e}", file=sys.stderr)
        return 1
    if body != expected:
        print(f"stomp_sub: body differs: got {len(body)} bytes {body[:80]!r}, expected {len(expected)}"
              f" bytes {expected[:80]!r}", file=sys.stderr)
        return 1
    print(f"received {len(body)} bytes, identical", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
