#!/usr/bin/python3
"""A process that polls a control file (stat, then open and read it all,
close, and again at once) reads exactly as many bytes as its stat said,
while the counters move (a writer/reader process). close(2) returns before
the kernel's RELEASE of that open reaches the daemon, and the open still
listed must not size the next stat (kvfs(7), COUNTERS, "Sizes"). Mounts a
real kvfs daemon ($KVFS_MOUNT_BIN) with pathmount's helper.
"""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402


def read_all(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        out = b""
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                return out
            out += b
    finally:
        os.close(fd)


BUSY = """
import os, sys
ns = os.path.join(sys.argv[1], "busy" + sys.argv[2])
os.mkdir(ns)
i = 0
while True:
    name = os.path.join(ns, "%032x" % (i % 64))
    try:
        with open(name, "xb") as f:
            f.write(b"x" * 524288)
    except FileExistsError:
        with open(name, "rb") as f:
            f.read()
    i += 1
"""


class CtlSizesTest(unittest.TestCase):
    def test_poller_under_load(self):
        m = pathmount.new_mount(["l1_size=16M", "max_chunk=1M"], l2=False)
        # another process moves the counters all along
        busy = [subprocess.Popen([sys.executable, "-c", BUSY, m.mnt, str(i)])
                for i in range(2)]
        bad = []
        try:
            for name in ("metrics", "stats") * 1000:
                p = os.path.join(m.mnt, ".kvfs", name)
                size = os.stat(p).st_size
                got = len(read_all(p))
                if size != got:
                    bad.append((name, size, got))
        finally:
            for b in busy:
                b.kill()
                b.wait()
            pathmount.drop_mount(m)
        self.assertEqual(bad, [], "stat size != bytes read")


if __name__ == "__main__":
    pathmount.need("daemon")
    unittest.main()
