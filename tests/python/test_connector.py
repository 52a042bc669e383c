#!/usr/bin/python3
"""Connector behaviour an engine author relies on (issue 17, 13-16), on a
real mount: construction refuses what is not a kvfs mount; a miss is None
(or False, or 0) everywhere and never an exception; chunk_bytes / dtype
set the namespace's xattrs; delete, contains and the async forms; errors
name the caller's key or lease, never the module's temporary file.

Mounts its own kvfs ($KVFS_MOUNT_BIN, a subprocess) with pathmount's
helper; loads libkvfs.so from $KVFS_PLAIN_BUILD. Exit 77 when the daemon
or the library is not built.
"""
import concurrent.futures
import errno
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
LIB = os.path.join(pathmount.PLAIN, "libkvfs.so")
if "KVFS_LIB" not in os.environ and os.path.exists(LIB):
    os.environ["KVFS_LIB"] = LIB
import kvfs  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None

M = None


def setUpModule():
    global M
    M = pathmount.new_mount(["l1_size=32M", "max_chunk=1M", "lease_ms=2000"],
                            l2=False)


def tearDownModule():
    pathmount.drop_mount(M)


_seq = [0]
_seq_lock = threading.Lock()


def fresh_ns(tag):
    with _seq_lock:
        _seq[0] += 1
        return "conn.%s.%d" % (tag, _seq[0])


def xattr(ns, name):
    return os.getxattr(os.path.join(M.mnt, ns), name).decode()


class ConstructTest(unittest.TestCase):
    def test_plain_directory(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(kvfs.NotKvfsMountError) as cm:
                kvfs.Connector(d, "ns")
            e = cm.exception
            self.assertIsInstance(e, OSError)
            self.assertEqual(e.errno, errno.ENODEV)
            self.assertEqual(e.filename, d)
            self.assertIn("not the root of a kvfs mount", str(e))
            # and nothing was created there
            self.assertEqual(os.listdir(d), [])

    def test_below_the_mount_root(self):
        ns = fresh_ns("sub")
        kvfs.Connector(M.mnt, ns).close()
        with self.assertRaises(kvfs.NotKvfsMountError):
            kvfs.Connector(os.path.join(M.mnt, ns), "inner")
        self.assertEqual(os.listdir(os.path.join(M.mnt, ns)), [])

    def test_missing_path(self):
        with self.assertRaises(FileNotFoundError):
            kvfs.Connector("/nonexistent/kvfs", "ns")


class MissTest(unittest.TestCase):
    """One way: None from every getter, False from exists and delete, 0
    from contains; never an exception."""

    def test_miss_everywhere(self):
        with kvfs.Connector(M.mnt, fresh_ns("miss"), chunk_tokens=4) as c:
            k = c.keys(range(4))[0]
            self.assertIsNone(c.get(k))
            self.assertIsNone(c.get(k, bytearray(64)))
            self.assertIsNone(c.get_mmap(k))
            self.assertIsNone(c.handle(k))
            self.assertIsNone(c.stat(k))
            self.assertFalse(c.exists(k))
            self.assertFalse(c.delete(k))
            self.assertEqual(c.contains([k]), 0)
            self.assertEqual(c.lookup([k]).found, 0)
            self.assertEqual(c.get_many([k], [bytearray(64)]), [None])
            self.assertIsNone(c.get_async(k).result(30))
            self.assertEqual(
                c.get_many_async([k], [bytearray(64)]).result(30), [None])
            # a hit, through the same calls
            c.put(k, b"h" * 64)
            self.assertEqual(c.get(k), b"h" * 64)
            self.assertEqual(c.stat(k).st_size, 64)
            with c.handle(k) as h:
                self.assertEqual(h.length, 64)
            self.assertEqual(c.contains([k]), 1)


class NamespaceAttrTest(unittest.TestCase):
    def test_chunk_bytes_dtype_set_on_create(self):
        ns = fresh_ns("attrs")
        with kvfs.Connector(M.mnt, ns, chunk_bytes=4096, dtype="bf16",
                            chunk_tokens=16) as c:
            self.assertEqual(xattr(ns, "user.kvfs.chunk_bytes"), "4096")
            self.assertEqual(xattr(ns, "user.kvfs.dtype"), "bf16")
            self.assertEqual(xattr(ns, "user.kvfs.chunk_tokens"), "16")
            k = c.keys(range(32))
            self.assertTrue(c.put(k[0], b"a" * 4096))
            # the daemon enforces chunk_bytes; the error names the key
            with self.assertRaises(OSError) as cm:
                c.put(k[1], b"a" * 100)
            self.assertEqual(cm.exception.errno, errno.EMSGSIZE)
            self.assertIn("%s/%s" % (ns, kvfs.key_hex(k[1])),
                          str(cm.exception))
            self.assertNotIn(".put.", str(cm.exception))
            self.assertIsNone(c.get(k[1]))  # nothing published
            self.assertEqual([n for n in os.listdir(os.path.join(M.mnt, ns))],
                             [kvfs.key_hex(k[0])])
        # the same values again: fine; others: ValueError
        kvfs.Connector(M.mnt, ns, chunk_bytes=4096, dtype="bf16").close()
        with self.assertRaises(ValueError) as cm:
            kvfs.Connector(M.mnt, ns, chunk_bytes=8192)
        self.assertIn("4096", str(cm.exception))
        with self.assertRaises(ValueError):
            kvfs.Connector(M.mnt, ns, dtype="fp32")

    def test_unset_attrs_are_set(self):
        ns = fresh_ns("late")
        kvfs.Connector(M.mnt, ns).close()
        with self.assertRaises(OSError):
            xattr(ns, "user.kvfs.dtype")
        kvfs.Connector(M.mnt, ns, chunk_bytes=512, dtype="fp8").close()
        self.assertEqual(xattr(ns, "user.kvfs.chunk_bytes"), "512")
        self.assertEqual(xattr(ns, "user.kvfs.dtype"), "fp8")

    @unittest.skipIf(np is None, "numpy not importable")
    def test_numpy_dtypes(self):
        for dt, want in ((np.float16, "fp16"), (np.dtype("float32"), "fp32"),
                         ("float16", "fp16")):
            ns = fresh_ns("np")
            kvfs.Connector(M.mnt, ns, dtype=dt).close()
            self.assertEqual(xattr(ns, "user.kvfs.dtype"), want)

    def test_bad_values_create_nothing(self):
        ns = fresh_ns("bad")
        for kw in ({"dtype": "int8"}, {"chunk_bytes": -1},
                   {"chunk_bytes": "4096"}, {"workers": 0}):
            with self.assertRaises(ValueError):
                kvfs.Connector(M.mnt, ns, **kw)
        self.assertFalse(os.path.exists(os.path.join(M.mnt, ns)))
        # refused by the daemon (above max_chunk=1M): the namespace it
        # had just made is removed again, the error names the xattr
        with self.assertRaises(OSError) as cm:
            kvfs.Connector(M.mnt, ns, chunk_bytes=4 << 20)
        self.assertEqual(cm.exception.errno, errno.EFBIG)
        self.assertIn("user.kvfs.chunk_bytes", str(cm.exception))
        self.assertIn(ns, str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(M.mnt, ns)))


class DeleteContainsTest(unittest.TestCase):
    def test_delete_and_contains(self):
        with kvfs.Connector(M.mnt, fresh_ns("dc"), chunk_tokens=4) as c:
            ks = c.keys(range(24))  # a chain of 6
            for k in ks[:4]:
                c.put(k, b"d" * 128)
            self.assertEqual(c.contains(ks), 4)
            self.assertEqual(c.contains(ks[:2]), 2)
            self.assertEqual(c.contains(ks[4:]), 0)
            self.assertEqual(c.contains([]), 0)
            self.assertEqual(c.contains(iter(ks)), 4)  # any iterable
            self.assertTrue(c.delete(ks[1]))
            self.assertFalse(c.delete(ks[1]))
            self.assertFalse(c.exists(ks[1]))
            self.assertEqual(c.contains(ks), 1)  # the run stops at the hole
            # contains pins nothing
            self.assertEqual(os.getxattr(
                os.path.join(M.mnt, c.namespace, kvfs.key_hex(ks[0])),
                "user.kvfs.refs"), b"0")
            # an open reader keeps reading a deleted chunk
            with open(os.path.join(M.mnt, c.namespace,
                                   kvfs.key_hex(ks[2])), "rb") as f:
                self.assertTrue(c.delete(ks[2]))
                self.assertEqual(f.read(), b"d" * 128)
            self.assertIsNone(c.get(ks[2]))


class AsyncTest(unittest.TestCase):
    def test_put_get_async(self):
        with kvfs.Connector(M.mnt, fresh_ns("async"), chunk_tokens=4,
                            workers=3) as c:
            ks = c.keys(range(4 * 16))
            data = [bytes([i]) * (1000 + i) for i in range(len(ks))]
            futs = [c.put_async(k, d) for k, d in zip(ks, data)]
            self.assertTrue(all(isinstance(f, concurrent.futures.Future)
                                for f in futs))
            self.assertEqual([f.result(60) for f in futs], [True] * len(ks))
            # a second put of the same key: False, as put says
            self.assertFalse(c.put_async(ks[0], data[0]).result(60))
            got = [c.get_async(k) for k in ks]
            self.assertEqual([f.result(60) for f in got], data)
            buf = bytearray(2000)
            self.assertEqual(c.get_async(ks[3], buf).result(60), 1003)
            self.assertEqual(bytes(buf[:1003]), data[3])
            # the pool is the connector's, workers threads at most
            names = {t.name for t in threading.enumerate()
                     if t.name.startswith("kvfs-" + c.namespace)}
            self.assertTrue(1 <= len(names) <= 3, names)

    def test_many_async_match_sync(self):
        with kvfs.Connector(M.mnt, fresh_ns("many"), chunk_tokens=4,
                            chunk_bytes=256) as c:
            ks = c.keys(range(4 * 6))
            res = c.put_many_async(ks[:4], [b"m" * 256] * 4).result(60)
            self.assertEqual(res, [True] * 4)
            res = c.put_many_async(ks[3:5], [b"m" * 256, b"short"]).result(60)
            self.assertIs(res[0], False)  # already there
            self.assertIsInstance(res[1], OSError)  # EMSGSIZE, that key
            self.assertEqual(res[1].errno, errno.EMSGSIZE)
            self.assertIn(kvfs.key_hex(ks[4]), str(res[1]))
            bufs = [bytearray(256) for _ in ks]
            res = c.get_many_async(ks, bufs).result(60)
            self.assertEqual(res, [256] * 4 + [None, None])
            self.assertEqual(res, c.get_many(ks, bufs))

    def test_errors_through_futures_and_close(self):
        c = kvfs.Connector(M.mnt, fresh_ns("aerr"), chunk_tokens=4,
                           chunk_bytes=64)
        k = c.keys(range(4))[0]
        f = c.put_async(k, b"x")
        self.assertIsInstance(f.exception(60), OSError)
        self.assertEqual(f.exception().errno, errno.EMSGSIZE)
        self.assertNotIn(".put.", str(f.exception()))
        with self.assertRaises(ValueError):
            c.put_async("zz", b"x" * 64).result(60)  # a bad key
        pending = [c.put_async(kk, b"p" * 64)
                   for kk in c.keys(range(4 * 20))]
        c.close()  # waits for what is queued
        self.assertTrue(all(p.done() for p in pending))
        self.assertEqual([p.result() for p in pending], [True] * 20)
        with self.assertRaises(ValueError):
            c.put_async(k, b"x" * 64)


class ErrorNameTest(unittest.TestCase):
    def test_unpin_names_the_lease(self):
        with kvfs.Connector(M.mnt, fresh_ns("lease")) as c:
            with self.assertRaises(FileNotFoundError) as cm:
                c.unpin(123456789)
            self.assertIn("lease 123456789", str(cm.exception))

    def test_put_errors_name_the_key(self):
        ns = fresh_ns("perm")
        with kvfs.Connector(M.mnt, ns, chunk_tokens=4) as c:
            k = c.keys(range(4))[0]
            # above max_chunk (1M): EFBIG from a write, named by the key
            with self.assertRaises(OSError) as cm:
                c.put(k, bytes(2 << 20))
            self.assertEqual(cm.exception.errno, errno.EFBIG)
            msg = str(cm.exception)
            self.assertIn("put %s/%s" % (ns, kvfs.key_hex(k)), msg)
            self.assertNotIn(".put.", msg)
            self.assertIsNone(cm.exception.filename)
            # nothing of the failed put is left behind, not even its
            # temporary
            self.assertEqual(os.listdir(os.path.join(M.mnt, ns)), [])
            self.assertIsNone(c.get(k))

    def test_put_into_removed_namespace_names_the_key(self):
        ns = fresh_ns("gone")
        with kvfs.Connector(M.mnt, ns, chunk_tokens=4) as c:
            k = c.keys(range(4))[0]
            os.rmdir(os.path.join(M.mnt, ns))
            with self.assertRaises(FileNotFoundError) as cm:
                c.put(k, b"g" * 10)
            self.assertIn("put %s/%s" % (ns, kvfs.key_hex(k)),
                          str(cm.exception))
            self.assertNotIn(".put.", str(cm.exception))

    def test_get_buffer_too_small_names_the_key(self):
        ns = fresh_ns("small")
        with kvfs.Connector(M.mnt, ns, chunk_tokens=4) as c:
            k = c.keys(range(4))[0]
            c.put(k, b"s" * 100)
            with self.assertRaises(ValueError) as cm:
                c.get(k, bytearray(10))
            self.assertIn(kvfs.key_hex(k), str(cm.exception))


if __name__ == "__main__":
    pathmount.need("daemon")
    try:
        kvfs.load_library()
    except OSError as e:
        print("skip: %s" % e)
        sys.exit(77)
    unittest.main()
