#!/usr/bin/python3
"""Path files found by name in L3 from another node (issue 28, item 4).

A real redis-server on loopback and two kvfs mounts sharing it, each with
a path namespace "pp". Node A writes pp/x/y.bin (l3_ingest=all); node B,
which never saw it, opens pp/x/y.bin by name: the lookup of "x" finds the
directory A's file implies (its marker in L3), the lookup of "y.bin" the
file, promoted from L3 and checked; lookup, stat and open agree. Also: a
name in neither tier is ENOENT on B; a file B loses locally (evicted, no
L2) is found again in L3; a key namespace is unchanged.
"""
import errno
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
import redisserver  # noqa: E402
sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
import kvfs  # noqa: E402

pathmount.need("daemon")
redisserver.need()

R = None
TMP = None
A = B = None


def node_opts(ingest):
    # allow_other: another user's lookups and GETs (test_by_key_as_...)
    return ["names=paths", "l1_size=16M", "max_chunk=4M", "allow_other",
            "l3=redis://127.0.0.1:%d" % R.port, "l3_ingest=" + ingest]


def setUpModule():
    global R, TMP, A, B
    TMP = tempfile.mkdtemp(prefix="kvfs-pl3.")
    R = redisserver.Redis(TMP)
    A = pathmount.new_mount(node_opts("all"), l2=False)
    B = pathmount.new_mount(node_opts("evicted"), l2=False)


def tearDownModule():
    for m in (A, B):
        if m:
            pathmount.drop_mount(m)
    if R:
        R.kill()
    shutil.rmtree(TMP, ignore_errors=True)


def put(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def wait_key(path_in_ns, ns="pp", s=10.0):
    """Until the file's record reached Redis."""
    key = kvfs.path_key(path_in_ns).hex()
    end = time.monotonic() + s
    while time.monotonic() < end:
        if R.cli("EXISTS", "kvfs:%s:%s" % (ns, key)) == "1":
            return True
        time.sleep(0.05)
    return False


class PathsL3(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.mkdir(os.path.join(A.mnt, "pp"))
        os.mkdir(os.path.join(B.mnt, "pp"))

    def test_read_by_name_on_another_node(self):
        data = os.urandom(300000)
        os.makedirs(os.path.join(A.mnt, "pp/x/z"))
        put(os.path.join(A.mnt, "pp/x/y.bin"), data)
        put(os.path.join(A.mnt, "pp/x/z/w.bin"), b"w" * 5000)
        with open(os.path.join(A.mnt, "pp/x/y.bin"), "rb") as f:
            self.assertEqual(f.read(), data)  # published
        with open(os.path.join(A.mnt, "pp/x/z/w.bin"), "rb") as f:
            f.read()
        self.assertTrue(wait_key("x/y.bin"), "A's file never reached L3")
        self.assertTrue(wait_key("x/z/w.bin"))
        time.sleep(0.3)  # the directory markers, queued before
        pb = os.path.join(B.mnt, "pp/x/y.bin")
        st = os.stat(pb)  # lookup of x, then of y.bin
        self.assertEqual(st.st_size, len(data))
        with open(pb, "rb") as f:  # open agrees with lookup
            self.assertEqual(f.read(), data)
        self.assertEqual(os.stat(pb).st_ino, st.st_ino)
        self.assertTrue(os.path.isdir(os.path.join(B.mnt, "pp/x")))
        # a deeper path, straight away
        with open(os.path.join(B.mnt, "pp/x/z/w.bin"), "rb") as f:
            self.assertEqual(f.read(), b"w" * 5000)
        # found names are listed from then on
        self.assertIn("y.bin", os.listdir(os.path.join(B.mnt, "pp/x")))
        # a name in neither tier is a miss, a file is not a directory
        for p in ("pp/x/nope.bin", "pp/nodir", "pp/x/y.bin/sub"):
            with self.assertRaises(OSError) as cm:
                os.stat(os.path.join(B.mnt, p))
            self.assertIn(cm.exception.errno, (errno.ENOENT, errno.ENOTDIR),
                          p)
        self.assertFalse(os.path.exists(os.path.join(B.mnt, "pp/x/nope")))

    def test_by_key_as_another_user(self):
        """A file another node stored, that this node has no name for
        yet: another user's lookup and GET by its path key find it in L3
        (judged as its name would be here: 0755 directories, a 0644
        file), as root's do."""
        why = pathmount.run_as_skip_reason()
        if why:
            self.skipTest(why)
        os.makedirs(os.path.join(A.mnt, "pp/k"))
        put(os.path.join(A.mnt, "pp/k/v.bin"), b"v" * 3000)
        with open(os.path.join(A.mnt, "pp/k/v.bin"), "rb") as f:
            f.read()
        self.assertTrue(wait_key("k/v.bin"))
        r = pathmount.run_as(
            "import kvfs\n"
            "c = kvfs.Connector(%r, 'pp', create=False)\n"
            "k = kvfs.path_key('k/v.bin')\n"
            "b = bytearray(4096)\n"
            "print(c.lookup([k]).found, c.get_many([k], [b]), "
            "bytes(b[:3]))\n" % B.mnt)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "1 [3000] b'vvv'")

    def test_lost_locally_found_again(self):
        os.makedirs(os.path.join(B.mnt, "pp/lost"))
        # B's own file (ingest=evicted): evicted from B's L1 into L3
        put(os.path.join(B.mnt, "pp/lost/f.bin"), b"f" * 100000)
        with open(os.path.join(B.mnt, "pp/lost/f.bin"), "rb") as f:
            f.read()
        for i in range(12):  # 12 x 2 MiB through a 16 MiB L1
            put(os.path.join(B.mnt, "pp/lost/fill%d" % i),
                os.urandom(2 << 20))
        self.assertTrue(wait_key("lost/f.bin"))
        time.sleep(0.5)
        with open(os.path.join(B.mnt, "pp/lost/f.bin"), "rb") as f:
            self.assertEqual(f.read(), b"f" * 100000)


if __name__ == "__main__":
    unittest.main()
