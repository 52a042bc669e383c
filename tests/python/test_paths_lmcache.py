#!/usr/bin/python3
"""LMCache's LocalDiskBackend on a kvfs path namespace, unchanged.

Reproduces, with our own code, the system calls of LocalDiskBackend in
lmcache/v1/storage_backend/local_disk_backend.py:

  __init__: stat(path) (os.path.exists), makedirs(path), statvfs(path)
            for f_bsize (O_DIRECT needs sizes that are a multiple of it)
  names:    <path>/<model@world_size@worker_id@chunk_hash@dtype with
            '/' -> '-'>.pt (CacheEngineKey.to_string), one flat directory
  write_file, in place (no temporary):
            buffered: open(O_WRONLY|O_CREAT|O_TRUNC) ("wb"), write, close
            use_odirect and size % f_bsize == 0:
            open(O_CREAT|O_WRONLY|O_DIRECT, 0644), write, close
  read_file: buffered: open(O_RDONLY) ("rb"), readinto, close;
            O_DIRECT: open(O_RDONLY|O_DIRECT), fdopen(buffering=0),
            readinto, close; FileNotFoundError is a miss
  remove:   unlink

with 2 MiB chunks in page-aligned numpy buffers, across eviction to L2 and
a remount, verifying every byte, and with 8 backends (threads) storing the
same chunks at once.

One difference from a local disk, by design (kvfs(7)): a published file is
never changed in place, so LMCache's O_DIRECT write of a chunk that already
exists (open without O_TRUNC) fails with EPERM and leaves the existing,
complete file as it was; LMCache logs the failed put. Its buffered write
("wb" truncates) replaces the file instead.
"""
import errno
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
from pathmount import BLOCK  # noqa: E402

pathmount.need("daemon")
pathmount.need("numpy")
import numpy as np  # noqa: E402

M = None


class LocalDiskBackend:
    def __init__(self, path, use_odirect=False):
        self.path = path
        if not os.path.exists(self.path):
            os.makedirs(self.path)
        self.bs = os.statvfs(self.path).f_bsize
        self.use_odirect = use_odirect
        self.dict = {}

    def key_path(self, key):
        return os.path.join(self.path, key.replace("/", "-") + ".pt")

    def write_file(self, buf, path):
        if len(buf) % self.bs != 0 or not self.use_odirect:
            with open(path, "wb") as f:
                f.write(buf)
        else:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
            try:
                os.write(fd, buf)
            finally:
                os.close(fd)

    def read_file(self, key, buf, path):
        aligned = len(buf) % self.bs == 0
        try:
            if not aligned or not self.use_odirect:
                with open(path, "rb") as f:
                    return f.readinto(buf)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            with os.fdopen(fd, "rb", buffering=0) as fdo:
                return fdo.readinto(buf)
        except FileNotFoundError:
            self.dict.pop(key, None)
            return None

    def put(self, key, buf):
        path = self.key_path(key)
        self.write_file(buf, path)
        self.dict[key] = (path, len(buf))

    def remove(self, key):
        path, _ = self.dict.pop(key)
        os.remove(path)


def chunk_key(i, model="meta-llama/Llama-3.1-8B"):
    return "%s@%d@%d@%x@%s" % (model, 1, 0, 0x1234567890abcdef * (i + 1)
                               & (2 ** 64 - 1), "bfloat16")


def setUpModule():
    global M
    M = pathmount.new_mount()


def tearDownModule():
    pathmount.drop_mount(M)


class LmcacheLocalDisk(unittest.TestCase):
    N = 24

    def run_backend(self, sub, use_odirect):
        d = os.path.join(M.mnt, sub)
        be = LocalDiskBackend(d, use_odirect)  # makedirs: the namespace
        self.assertEqual(os.getxattr(d, "user.kvfs.names"), b"paths")
        self.assertEqual(be.bs % 4096, 0)
        mm, buf = pathmount.aligned(BLOCK)
        want = [pathmount.kv_block(3000 + i) for i in range(self.N)]
        keys = [chunk_key(i) for i in range(self.N)]
        for k, w in zip(keys, want):
            buf[:] = w
            be.put(k, memoryview(buf))
        self.assertEqual(sorted(os.listdir(d)),
                         sorted(k.replace("/", "-") + ".pt" for k in keys))
        tiers = [pathmount.tier_of(be.key_path(k)) for k in keys]
        for k, w in zip(keys, want):
            buf[:] = 0
            self.assertEqual(be.read_file(k, memoryview(buf),
                                          be.key_path(k)), BLOCK)
            self.assertTrue(np.array_equal(buf, w), k)
        self.assertIn("l2", tiers)
        # remove, then a read of it is a miss
        be.remove(keys[0])
        self.assertIsNone(be.read_file(keys[0], memoryview(buf),
                                       be.key_path(keys[0])))
        M.remount()
        be = LocalDiskBackend(d, use_odirect)
        for k, w in zip(keys[1:], want[1:]):
            buf[:] = 0
            self.assertEqual(be.read_file(k, memoryview(buf),
                                          be.key_path(k)), BLOCK)
            self.assertTrue(np.array_equal(buf, w), k)
        self.assertFalse(os.path.exists(be.key_path(keys[0])))
        return be, keys, want

    def test_buffered(self):
        be, keys, want = self.run_backend("lmcache", False)
        # a second put of an existing chunk ("wb" truncates): replaced, same
        # bytes, one file
        mm, buf = pathmount.aligned(BLOCK)
        buf[:] = want[1]
        be.put(keys[1], memoryview(buf))
        buf[:] = 0
        self.assertEqual(be.read_file(keys[1], memoryview(buf),
                                      be.key_path(keys[1])), BLOCK)
        self.assertTrue(np.array_equal(buf, want[1]))

    def test_odirect(self):
        be, keys, want = self.run_backend("lmcache-odirect", True)
        mm, buf = pathmount.aligned(BLOCK)
        buf[:] = 0
        with self.assertRaises(OSError) as cm:
            be.put(keys[1], memoryview(buf))  # in place, no O_TRUNC
        self.assertEqual(cm.exception.errno, errno.EPERM)
        self.assertEqual(be.read_file(keys[1], memoryview(buf),
                                      be.key_path(keys[1])), BLOCK)
        self.assertTrue(np.array_equal(buf, want[1]))

    def test_eight_backends_store_the_same_chunks(self):
        d = os.path.join(M.mnt, "lmcache8")
        os.mkdir(d)
        n = 6
        want = [pathmount.kv_block(4000 + i) for i in range(n)]
        keys = [chunk_key(100 + i) for i in range(n)]
        errs = []
        start = threading.Barrier(8)

        def worker():
            be = LocalDiskBackend(d, False)
            mm, buf = pathmount.aligned(BLOCK)
            start.wait()
            try:
                for k, w in zip(keys, want):
                    buf[:] = w
                    be.put(k, memoryview(buf))
            except OSError as e:
                import traceback
                errs.append(traceback.format_exc())

        ts = [threading.Thread(target=worker) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errs, [])
        be = LocalDiskBackend(d, False)
        self.assertEqual(len(os.listdir(d)), n)
        mm, buf = pathmount.aligned(BLOCK)
        for k, w in zip(keys, want):
            self.assertEqual(os.stat(be.key_path(k)).st_size, BLOCK)
            self.assertEqual(be.read_file(k, memoryview(buf),
                                          be.key_path(k)), BLOCK)
            self.assertTrue(np.array_equal(buf, w), k)


if __name__ == "__main__":
    unittest.main()
