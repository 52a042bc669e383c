#!/usr/bin/python3
"""Round trips and read order of vLLM's file tier calls on a path
namespace (issue 26), counted by the daemon (.kvfs/stats "requests",
"readahead"), never timed:

- an absent name's LOOKUP is cached (without L3): stat(dest), makedirs'
  exists() and its mkdir() cost one LOOKUP of a new directory, not three,
  and a name created, renamed there or unlinked since is seen at once;
- a file published by a rename is first read with two LOOKUPs (the
  kernel's check of the entry the writer left, then the name's), and
  later reads with none (directories and published files are cached for
  FS_PATH_TTL, not a second: three LOOKUPs before); the writer's entry
  is not dropped in the background to save the first, since a drop
  that comes after a reader's open shows that reader's fd as
  "NAME (deleted)" (test_paths_posix.py);
- files stored and never read are read back after a restart with chain
  readahead in the order they were stored (no prefetch call).
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
from pathmount import BLOCK  # noqa: E402

pathmount.need("daemon")
pathmount.need("numpy")
import numpy as np  # noqa: E402

M = None


def setUpModule():
    global M
    M = pathmount.new_mount(["names=paths", "l1_size=96M", "max_chunk=4M",
                             "l2_size=256M", "flush_on_exit=1"])
    os.mkdir(os.path.join(M.mnt, "v"))


def tearDownModule():
    pathmount.drop_mount(M)


def requests():
    return pathmount.stats(M.mnt)["requests"]


def counted(fn):
    """FUSE requests fn made, by kind (less those of reading the stats)."""
    a = requests()
    b = requests()
    fn()
    c = requests()
    return {k: (c[k] - b[k]) - (b[k] - a[k]) for k in c}


def store(dest, data):
    """vLLM's store_block: exists, makedirs, a temporary, rename."""
    if os.path.exists(dest):
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + "_1.tmp"
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC,
                 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, dest)


def load(src):
    with open(src, "rb") as f:
        return f.read()


class RoundTrips(unittest.TestCase):
    def test_absent_name_one_lookup(self):
        d = os.path.join(M.mnt, "v", "absent")
        os.mkdir(d)
        x = os.path.join(d, "x")
        n = counted(lambda: [os.path.exists(x) for _ in range(3)])
        self.assertEqual(n["lookup"], 1)
        # what this kernel makes there is seen at once
        with open(x, "wb") as f:
            f.write(b"one")
        self.assertEqual(load(x), b"one")
        y = os.path.join(d, "y")
        self.assertFalse(os.path.exists(y))
        os.rename(x, y)
        self.assertFalse(os.path.exists(x))
        self.assertEqual(load(y), b"one")
        sub = os.path.join(d, "sub")
        self.assertFalse(os.path.exists(sub))
        os.mkdir(sub)
        self.assertTrue(os.path.isdir(sub))
        os.unlink(y)
        self.assertFalse(os.path.exists(y))
        with self.assertRaises(FileNotFoundError):
            os.stat(y)

    def test_store_new_directory(self):
        dest = os.path.join(M.mnt, "v", "abc", "de_g0", "f.bin")
        n = counted(lambda: store(dest, b"k" * 4096))
        # exists: 1 (abc), makedirs' exists(abc): 0, mkdir(abc): 1 (an
        # O_EXCL lookup always asks), mkdir(de_g0): 1, open: 1,
        # rename: 2 (the temporary, the target)
        self.assertLessEqual(n["lookup"], 6)
        self.assertEqual(load(dest), b"k" * 4096)

    def test_read_after_rename_two_lookups(self):
        dest = os.path.join(M.mnt, "v", "r", "f.bin")
        store(dest, b"r" * 8192)
        time.sleep(0.5)  # the background thread's turn
        n = counted(lambda: self.assertEqual(load(dest), b"r" * 8192))
        self.assertEqual(n["lookup"], 2)
        self.assertEqual(n["open"], 1)
        n = counted(lambda: self.assertEqual(load(dest), b"r" * 8192))
        self.assertEqual(n["lookup"], 0)
        self.assertEqual(n["open"], 1)

    def test_read_later_two_lookups_then_none(self):
        dest = os.path.join(M.mnt, "v", "later", "f.bin")
        store(dest, b"l" * 8192)
        time.sleep(1.5)  # past FS_TTL
        n = counted(lambda: self.assertEqual(load(dest), b"l" * 8192))
        self.assertEqual(n["lookup"], 2)
        time.sleep(1.5)
        n = counted(lambda: self.assertEqual(load(dest), b"l" * 8192))
        self.assertEqual(n["lookup"], 0)
        # what the names are is still what this kernel did since
        os.rename(dest, dest + ".old")
        self.assertFalse(os.path.exists(dest))
        self.assertEqual(load(dest + ".old"), b"l" * 8192)
        os.unlink(dest + ".old")
        os.rmdir(os.path.dirname(dest))
        self.assertFalse(os.path.exists(os.path.dirname(dest)))


class StoreOrder(unittest.TestCase):
    def test_readahead_in_store_order_after_restart(self):
        global M
        root = os.path.join(M.mnt, "v", "order")
        names = ["%03x/%02x_g0/%d.bin" % (i * 37 % 4096, i % 256, i)
                 for i in range(12)]
        for i, n in enumerate(names):
            store(os.path.join(root, n), pathmount.kv_block(i, BLOCK))
        M.remount()  # every block only in L2, none ever read
        root = os.path.join(M.mnt, "v", "order")
        for i, n in enumerate(names):
            got = np.frombuffer(load(os.path.join(root, n)), dtype=np.uint8)
            self.assertTrue(np.array_equal(got,
                                           pathmount.kv_block(i, BLOCK)))
        ra = pathmount.stats(M.mnt)["readahead"]
        self.assertGreater(ra["promotions"], 0)
        self.assertGreater(ra["hits"], 0)


if __name__ == "__main__":
    unittest.main()
