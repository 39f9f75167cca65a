#!/usr/bin/env python3
"""A TCP relay that counts the bytes it carries, for the benchmark's S3 rows.

    tcp_count.py LISTEN_PORT TARGET_PORT COUNT_FILE

Listens on 127.0.0.1:LISTEN_PORT, relays every connection to
127.0.0.1:TARGET_PORT, and keeps COUNT_FILE holding "UP DOWN" (bytes sent to
the server and bytes received from it, since start), rewritten (atomically)
within 0.2 s of any change. It parses nothing: requests are counted from the
server's own log.
"""
import os
import socket
import sys
import threading
import time

lock = threading.Lock()
totals = [0, 0]  # up, down


def pipe(src, dst, idx):
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
            with lock:
                totals[idx] += len(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client, target):
    try:
        upstream = socket.create_connection(("127.0.0.1", target))
    except OSError:
        client.close()
        return
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = threading.Thread(target=pipe, args=(upstream, client, 1), daemon=True)
    t.start()
    pipe(client, upstream, 0)
    t.join()
    client.close()
    upstream.close()


def writer(path):
    last = None
    while True:
        with lock:
            now = tuple(totals)
        if now != last:
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{now[0]} {now[1]}\n")
            os.replace(tmp, path)
            last = now
        time.sleep(0.2)


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    listen, target, path = int(argv[1]), int(argv[2]), argv[3]
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listen))
    srv.listen(128)
    threading.Thread(target=writer, args=(path,), daemon=True).start()
    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c, target), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
