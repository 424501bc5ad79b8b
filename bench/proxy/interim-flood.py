#!/usr/bin/env python3
"""A backend that floods interim answers: each request gets `HTTP/1.1 100 Continue` heads in
1 MB writes for SECONDS (default 20), then a 200, or less once the client closes.
Usage: interim-flood.py PORT [SECONDS]"""
import socket
import sys
import threading
import time

HEAD = b"HTTP/1.1 100 Continue\r\n\r\n"
CHUNK = HEAD * (1_000_000 // len(HEAD))


def answer(conn, seconds):
    try:
        conn.recv(65536)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            conn.sendall(CHUNK)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    except OSError:
        pass
    finally:
        conn.close()


def main():
    port = int(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(128)
    while True:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=answer, args=(conn, seconds), daemon=True).start()


if __name__ == "__main__":
    main()
