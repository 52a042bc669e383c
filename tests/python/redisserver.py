"""A real redis-server on a free loopback port, for the L3 tests
(test_events_l3.py, test_paths_l3.py). Exit 77 (skip) when redis-server or
redis-cli is missing."""
import shutil
import socket
import subprocess
import sys
import time


def need():
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        print("skip: redis-server/redis-cli not installed (make deps)")
        sys.exit(77)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Redis:
    """One redis-server (no persistence) in directory tmp; kill() ends it."""

    def __init__(self, tmp):
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind",
                 "127.0.0.1", "--dir", tmp, "--save", "", "--appendonly",
                 "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.monotonic() + 10
            while time.monotonic() < end and self.proc.poll() is None:
                if self.cli("PING") == "PONG":
                    return
                time.sleep(0.05)
            self.proc.kill()  # port taken meanwhile: another one
            self.proc.wait()
        raise RuntimeError("redis-server did not start")

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port)] +
                              list(args), capture_output=True, text=True,
                              timeout=10).stdout.strip()

    def getrange(self, key, start, end):
        """GETRANGE of key (str) as bytes (a value is binary: not through
        redis-cli)."""
        args = [b"GETRANGE", key.encode(), b"%d" % start, b"%d" % end]
        with socket.create_connection(("127.0.0.1", self.port),
                                      timeout=10) as s:
            s.sendall(b"*%d\r\n" % len(args) + b"".join(
                b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
            buf = b""
            while b"\r\n" not in buf:
                buf += s.recv(4096)
            n = int(buf[1:buf.index(b"\r\n")])
            buf = buf[buf.index(b"\r\n") + 2:]
            while len(buf) < n:
                buf += s.recv(4096)
        return buf[:n]

    def kill(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
