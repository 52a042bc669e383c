#!/usr/bin/python3
"""SGLang's HiCacheFile storage backend on a kvfs path namespace, unchanged.

Reproduces, with our own code, the system calls of HiCacheFile in
python/sglang/srt/mem_cache/hicache_storage.py:

  __init__: stat(dir) (os.path.exists), makedirs(dir) on rank 0;
            listdir(dir) when the metadata cache is on
            (_scan_existing_files_to_metadata_cache)
  names:    <dir>/<key>_<model with '/' -> '-'>_<tp_rank>_<tp_size>.bin,
            one flat directory
  exists:   stat(<name>.bin)
  set:      exists() -> ENOENT, then numpy tofile(<name>.bin.tmp.<pid>.
            <tid>.<uuid hex>) (fopen "wb": open(O_WRONLY|O_CREAT|O_TRUNC),
            write, close), then rename(tmp, <name>.bin) (os.replace)
  get:      open(<name>.bin, O_RDONLY) (open(..., "rb", buffering=0)),
            readinto(target buffer) must return the expected size, close
  batch_exists_v2 without the metadata cache: os.scandir(dir),
            entry.is_file() and entry.name in the wanted set
  clear:    listdir, isfile (stat), unlink each

with 2 MiB pages in numpy buffers, across eviction to L2 and a remount,
verifying every byte, and with 8 threads setting the same pages at once.
"""
import hashlib
import os
import sys
import threading
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
from pathmount import BLOCK  # noqa: E402

pathmount.need("daemon")
pathmount.need("numpy")
import numpy as np  # noqa: E402

M = None


class HiCacheFile:
    def __init__(self, file_path, model="deepseek-ai/DeepSeek-V3", tp_rank=0,
                 tp_size=2, metadata_cache=False):
        self.file_path = file_path
        self.suffix = "_%s_%d_%d" % ("-".join(model.split("/")), tp_rank,
                                     tp_size)
        if not os.path.exists(self.file_path) and tp_rank == 0:
            os.makedirs(self.file_path)
        self.meta = set() if metadata_cache else None
        if self.meta is not None:
            for fn in os.listdir(self.file_path):
                if fn.endswith(".bin") and fn[:-4].endswith(self.suffix):
                    self.meta.add(fn[:-4])

    def path(self, key):
        return os.path.join(self.file_path, key + self.suffix + ".bin")

    def exists(self, key):
        if self.meta is not None and key + self.suffix in self.meta:
            return True
        return os.path.exists(self.path(key))

    def set(self, key, value):
        if self.exists(key):
            return True
        tensor_path = self.path(key)
        tmp = "%s.tmp.%d.%d.%s" % (tensor_path, os.getpid(),
                                    threading.get_ident(), uuid.uuid4().hex)
        try:
            value.view(np.uint8).tofile(tmp)
            os.replace(tmp, tensor_path)
            if self.meta is not None:
                self.meta.add(key + self.suffix)
            return True
        except Exception:
            try:
                os.remove(tmp)
            except OSError:
                pass
            return False

    def get(self, key, target):
        expected = target.nbytes
        try:
            with open(self.path(key), "rb", buffering=0) as f:
                if f.readinto(memoryview(target).cast("B")) != expected:
                    raise IOError("short read for %s" % key)
            return target
        except FileNotFoundError:
            if self.meta is not None:
                self.meta.discard(key + self.suffix)
            return None

    def batch_exists(self, keys):
        wanted = {key + self.suffix + ".bin" for key in keys}
        found = set()
        with os.scandir(self.file_path) as entries:
            for e in entries:
                if e.is_file() and e.name in wanted:
                    found.add(e.name)
        return next((i for i, k in enumerate(keys)
                     if k + self.suffix + ".bin" not in found), len(keys))

    def clear(self):
        for fn in os.listdir(self.file_path):
            p = os.path.join(self.file_path, fn)
            if os.path.isfile(p):
                os.remove(p)


def page_key(i):
    return hashlib.sha256(b"page %d" % i).hexdigest()


def setUpModule():
    global M
    M = pathmount.new_mount()


def tearDownModule():
    pathmount.drop_mount(M)


class SglangHiCacheFile(unittest.TestCase):
    N = 24

    def test_set_get_evict_remount(self):
        d = os.path.join(M.mnt, "hicache")
        os.mkdir(d)  # the namespace: HiCacheFile's flat directory
        hc = HiCacheFile(d)
        want = [pathmount.kv_block(i) for i in range(self.N)]
        keys = [page_key(i) for i in range(self.N)]
        self.assertEqual(hc.batch_exists(keys), 0)
        for k, w in zip(keys, want):
            self.assertTrue(hc.set(k, w))
        self.assertTrue(hc.set(keys[0], want[0]))  # exists: skipped
        self.assertEqual(hc.batch_exists(keys), self.N)
        self.assertEqual(hc.batch_exists(keys + [page_key(999)]), self.N)
        self.assertEqual(sorted(os.listdir(d)),
                         sorted(k + hc.suffix + ".bin" for k in keys))
        out = np.zeros(BLOCK, dtype=np.uint8)
        tiers = [pathmount.tier_of(hc.path(k)) for k in keys]
        for k, w in zip(keys, want):
            out[:] = 0
            self.assertIsNotNone(hc.get(k, out))
            self.assertTrue(np.array_equal(out, w), k)
        self.assertIn("l2", tiers)
        self.assertIsNone(hc.get(page_key(999), out))
        M.remount()
        hc = HiCacheFile(d, metadata_cache=True)
        self.assertEqual(len(hc.meta), self.N)
        self.assertEqual(hc.batch_exists(keys), self.N)
        for k, w in zip(keys, want):
            out[:] = 0
            self.assertIsNotNone(hc.get(k, out))
            self.assertTrue(np.array_equal(out, w), k)
        hc.clear()
        self.assertEqual(os.listdir(d), [])
        self.assertEqual(hc.batch_exists(keys), 0)

    def test_eight_threads_set_the_same_pages(self):
        d = os.path.join(M.mnt, "hicache8")
        os.mkdir(d)
        n = 6
        want = [pathmount.kv_block(500 + i) for i in range(n)]
        keys = [page_key(500 + i) for i in range(n)]
        fails = []
        start = threading.Barrier(8)

        def worker(rank):
            hc = HiCacheFile(d)
            start.wait()
            for k, w in zip(keys, want):
                if not hc.set(k, w):
                    fails.append(k)

        ts = [threading.Thread(target=worker, args=(r,)) for r in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(fails, [])
        hc = HiCacheFile(d)
        self.assertEqual(sorted(os.listdir(d)),
                         sorted(k + hc.suffix + ".bin" for k in keys))
        out = np.zeros(BLOCK, dtype=np.uint8)
        for k, w in zip(keys, want):
            self.assertIsNotNone(hc.get(k, out), pathmount.stats(M.mnt))
            self.assertTrue(np.array_equal(out, w), k)

    def test_mla_and_pp_names(self):
        # MLA models drop the tp suffix; pp adds _<pp_size>_<pp_rank>; a
        # component page adds ".<pool>" before the suffix
        d = os.path.join(M.mnt, "hicache-names")
        os.mkdir(d)
        hc = HiCacheFile(d, model="org/m")
        hc.suffix = "_org-m_4_1"
        w = pathmount.kv_block(9, 8192)
        k = page_key(9) + ".mamba"
        self.assertTrue(hc.set(k, w))
        out = np.zeros(8192, dtype=np.uint8)
        self.assertIsNotNone(hc.get(k, out))
        self.assertTrue(np.array_equal(out, w))


if __name__ == "__main__":
    unittest.main()
