#!/usr/bin/python3
"""vLLM's file-system offloading tier on a kvfs path namespace, unchanged.

Reproduces, with our own code, the system calls of
vllm/v1/kv_offload/tiering/fs/io.py (probe_o_direct, store_block,
load_block), vllm/v1/kv_offload/tiering/fs/file_mapper.py (the layout
<root>/<model>_<sha256[:12]>/config.json and
<root>/<model>_<sha256[:12]>_r<rank>/<hhh>/<hh>_g<group>/<hash hex>.bin,
write_run_config) and the NoOpEvictor's lookup (os.path.exists) of
vllm/v1/kv_offload/tiering/fs/evictor.py:

  probe:  open(".o_direct_probe_<n>.tmp", O_CREAT|O_WRONLY|O_TRUNC|O_DIRECT,
          0644), write(one page from an anonymous mmap), close, unlink
  config: makedirs(base, exist_ok), stat(config.json) -> ENOENT,
          open(config.json, O_WRONLY|O_CREAT|O_TRUNC), write(json), close
  store:  stat(dest) -> ENOENT, makedirs(dirname(dest), exist_ok),
          open(dest + "_<n>.tmp", O_CREAT|O_EXCL|O_WRONLY|O_TRUNC|O_DIRECT,
          0644), write(block, page-aligned), close, rename(tmp, dest)
  lookup: stat(dest)
  load:   open(dest, O_RDONLY|O_DIRECT), readv([block]), close

with 2 MiB blocks from page-aligned numpy buffers, across eviction to L2
and a remount, verifying every byte, and with 8 threads storing the same
blocks at once (each with its thread's tmp suffix, as vLLM's thread-local
_get_tmp_suffix gives).
"""
import errno
import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
from pathmount import BLOCK  # noqa: E402

pathmount.need("daemon")
pathmount.need("numpy")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
if "KVFS_LIB" not in os.environ and os.path.exists(
        os.path.join(pathmount.PLAIN, "libkvfs.so")):
    os.environ["KVFS_LIB"] = os.path.join(pathmount.PLAIN, "libkvfs.so")
import kvfs  # noqa: E402

O_DIRECT = os.O_DIRECT
M = None
_tls = threading.local()


def tmp_suffix():
    try:
        return _tls.suffix
    except AttributeError:
        _tls.suffix = "_%d.tmp" % random.randint(0, 2 ** 63 - 1)
        return _tls.suffix


def probe_o_direct(directory):
    path = os.path.join(directory, ".o_direct_probe" + tmp_suffix())
    page = pathmount.mmap.mmap(-1, pathmount.mmap.PAGESIZE)
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | O_DIRECT,
                     0o644)
        try:
            os.write(fd, page)
        finally:
            os.close(fd)
        return True
    except OSError:
        return False
    finally:
        page.close()
        try:
            os.remove(path)
        except OSError:
            pass


def store_block(dest, buf, offset, size, use_o_direct=True):
    if os.path.exists(dest):
        return False
    tmp = dest + tmp_suffix()
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    view = memoryview(buf).cast("B")[offset:offset + size]
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC |
                     (O_DIRECT if use_o_direct else 0), 0o644)
        try:
            n = os.write(fd, view)
            if n < len(view):
                raise OSError("short write %d" % n)
        finally:
            os.close(fd)
        os.replace(tmp, dest)
    except Exception:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return True


def load_block(src, buf, offset, size, use_o_direct=True):
    view = memoryview(buf).cast("B")[offset:offset + size]
    fd = os.open(src, os.O_RDONLY | (O_DIRECT if use_o_direct else 0))
    try:
        n = os.readv(fd, [view])
        if n < size:
            raise OSError(errno.EIO, "short read %d" % n)
    finally:
        os.close(fd)


class FileMapper:
    def __init__(self, root, model="meta-llama/Llama-3.1-8B", rank=0):
        self.rank = rank
        self.fields = {"model_name": model, "hash_block_size": 16,
                       "gpu_blocks_per_file": 1, "tp_size": 1, "pp_size": 1,
                       "pcp_size": 1, "dcp_size": 1, "dtype": "bfloat16",
                       "kv_cache_groups": [], "inference_engine": "vllm"}
        canon = json.dumps(self.fields, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(canon.encode()).hexdigest()[:12]
        self.base = "%s/%s_%s" % (root, model.replace("/", "_"), digest)

    def file_name(self, block_hash, group=0):
        h = block_hash.hex()
        return "%s_r%d/%s/%s_g%d/%s.bin" % (self.base, self.rank, h[:3],
                                             h[3:5], group, h)

    def write_run_config(self):
        os.makedirs(self.base, exist_ok=True)
        target = os.path.join(self.base, "config.json")
        if os.path.exists(target):
            return
        with open(target, "w") as f:
            json.dump(self.fields, f, indent=2, sort_keys=True)


def block_hash(i):
    return hashlib.sha256(b"block %d" % i).digest()


def setUpModule():
    global M
    M = pathmount.new_mount()


def tearDownModule():
    pathmount.drop_mount(M)


class VllmFsTier(unittest.TestCase):
    NBLOCKS = 24  # 48 MiB through a 24 MiB L1

    def root(self, name):
        root = os.path.join(M.mnt, name)
        if not os.path.isdir(root):
            os.mkdir(root)
        self.assertEqual(os.getxattr(root, "user.kvfs.names"), b"paths")
        return root

    def ctl(self, cmd, nsdir, rels):
        if not os.access(pathmount.CTL_BIN, os.X_OK):
            self.skipTest("no kvfsctl at %s" % pathmount.CTL_BIN)
        r = subprocess.run([pathmount.CTL_BIN, cmd, "--paths", nsdir],
                           input="".join(p + "\n" for p in rels).encode(),
                           stdout=subprocess.PIPE, check=True)
        out = r.stdout.decode().split()
        return " ".join(out[:2])

    def check_all(self, fm, n, want, buf):
        for i in range(n):
            dest = fm.file_name(block_hash(i))
            self.assertTrue(os.path.exists(dest), dest)
            buf[:] = 0
            load_block(dest, buf, 0, BLOCK)
            self.assertTrue(np.array_equal(buf, want[i]), "block %d" % i)

    def test_store_load_evict_remount(self):
        root = self.root("vllm")
        fm = FileMapper(root)
        self.assertTrue(probe_o_direct(root))
        self.assertEqual([e for e in os.listdir(root)
                          if e.startswith(".o_direct")], [])
        fm.write_run_config()
        fm.write_run_config()  # exists: a no-op
        mm, buf = pathmount.aligned(BLOCK)
        want = [pathmount.kv_block(i) for i in range(self.NBLOCKS)]
        for i in range(self.NBLOCKS):
            self.assertFalse(os.path.exists(fm.file_name(block_hash(i))))
            buf[:] = want[i]
            self.assertTrue(store_block(fm.file_name(block_hash(i)), buf, 0,
                                        BLOCK))
            # a second store of the same block finds it and does nothing
            self.assertFalse(store_block(fm.file_name(block_hash(i)), buf, 0,
                                         BLOCK))
        # no temporaries left anywhere, every block where vLLM put it
        names = []
        for d, _, files in os.walk(root):
            names += [os.path.join(d, f) for f in files]
        self.assertEqual(sum(1 for n in names if n.endswith(".tmp")), 0)
        self.assertEqual(sum(1 for n in names if n.endswith(".bin")),
                         self.NBLOCKS)
        tiers = [pathmount.tier_of(fm.file_name(block_hash(i)))
                 for i in range(self.NBLOCKS)]
        self.assertIn("l2", tiers, "nothing was evicted to L2: %s" % tiers)
        self.assertIn("l1", tiers)
        self.check_all(fm, self.NBLOCKS, want, buf)
        st = pathmount.stats(M.mnt)
        self.assertGreater(st["l2"]["chunks"], 0)
        with open(os.path.join(fm.base, "config.json")) as f:
            self.assertEqual(json.load(f), fm.fields)
        # batched lookup by path (kvfsctl, and libkvfs's path keys in the
        # lookup ioctl): the chain of stored blocks, then a miss ends it
        rels = [os.path.relpath(fm.file_name(block_hash(i)), root)
                for i in range(self.NBLOCKS)]
        self.assertEqual(self.ctl("lookup", root, rels),
                         "found=%d keys=%d" % (self.NBLOCKS, self.NBLOCKS))
        missing = rels[:3] + [os.path.relpath(
            fm.file_name(block_hash(999)), root)] + rels[3:5]
        self.assertEqual(self.ctl("lookup", root, missing), "found=3 keys=6")
        keys = kvfs.path_keys(rels)
        with kvfs.Connector(M.mnt, "vllm", chunk_tokens=16) as c:
            res = c.lookup(keys)
            self.assertEqual(res.found, self.NBLOCKS)
            self.assertEqual(res.in_l1 + res.in_l2, self.NBLOCKS)
            self.assertGreater(res.in_l2, 0)
        self.assertEqual(kvfs.path_key(rels[0]), keys[0])
        for bad in ("/abs", "a//b", "a/./b", "../x", "", "a/"):
            with self.assertRaises(ValueError):
                kvfs.path_key(bad)
        r = subprocess.run([pathmount.CTL_BIN, "lookup", "--paths", root],
                           input=b"a/../b\n", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"line 1", r.stderr)
        # warm restart: the tree, the names and the bytes come back
        M.remount()
        self.assertEqual(os.getxattr(root, "user.kvfs.names"), b"paths")
        with open(os.path.join(fm.base, "config.json")) as f:
            self.assertEqual(json.load(f), fm.fields)
        fm2 = FileMapper(root)
        self.assertTrue(probe_o_direct(root))
        fm2.write_run_config()
        # prefetch by path brings L2 blocks up before they are read
        self.assertTrue(self.ctl("prefetch", root, rels).startswith(
            "found=%d " % self.NBLOCKS))
        self.check_all(fm2, self.NBLOCKS, want, buf)
        self.assertFalse(os.path.exists(fm2.file_name(block_hash(10 ** 6))))

    def test_eight_threads_store_the_same_blocks(self):
        root = self.root("vllm8")
        fm = FileMapper(root, model="Qwen/Qwen3-0.6B")
        fm.write_run_config()
        n = 8
        want = [pathmount.kv_block(1000 + i) for i in range(n)]
        errors = []
        start = threading.Barrier(8)

        def worker():
            mm, buf = pathmount.aligned(BLOCK)
            try:
                start.wait()
                for i in range(n):
                    buf[:] = want[i]
                    store_block(fm.file_name(block_hash(1000 + i)), buf, 0,
                                BLOCK)
            except Exception as e:  # reported below
                errors.append(e)

        ts = [threading.Thread(target=worker) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        mm, buf = pathmount.aligned(BLOCK)
        for i in range(n):
            dest = fm.file_name(block_hash(1000 + i))
            load_block(dest, buf, 0, BLOCK)
            self.assertTrue(np.array_equal(buf, want[i]), dest)
            self.assertEqual(os.stat(dest).st_size, BLOCK)
            d = os.path.dirname(dest)
            self.assertEqual(sorted(os.listdir(d)),
                             [os.path.basename(dest)], d)

    def test_buffered_fallback(self):
        # use_o_direct=False: the same calls without O_DIRECT
        root = self.root("vllm-buffered")
        fm = FileMapper(root, model="m")
        mm, buf = pathmount.aligned(BLOCK)
        want = pathmount.kv_block(77)
        buf[:] = want
        dest = fm.file_name(block_hash(77))
        self.assertTrue(store_block(dest, buf, 0, BLOCK, use_o_direct=False))
        buf[:] = 0
        load_block(dest, buf, 0, BLOCK, use_o_direct=False)
        self.assertTrue(np.array_equal(buf, want))


if __name__ == "__main__":
    unittest.main()
