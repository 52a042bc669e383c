#!/usr/bin/python3
"""Tests of Connector.get_many / put_many (batched transfers) on a real
mount: every kind of buffer (bytes, bytearray, memoryview, numpy, mmap),
byte ranges, per-key results (miss, EMSGSIZE, ERANGE, EEXIST, EFBIG),
batches longer than one ioctl, bad arguments, and a killed caller.

Mounts through test_kvfs's helpers (same daemon, same unmount safety net).
Exit 77 (skip) when the daemon or the library is not built.
"""
import errno
import mmap
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_kvfs as base  # noqa: E402  (mount helpers, env, kvfs import)
from test_kvfs import kvfs, np  # noqa: E402

setUpModule = base.setUpModule
tearDownModule = base.tearDownModule


def data(i, n):
    return bytes((i * 131 + j * 7) & 0xFF for j in range(n))


def ioctl_stats():
    """(lookups, gets, puts) from .kvfs/stats."""
    import json
    with open(os.path.join(base.MNT, ".kvfs", "stats")) as f:
        st = json.load(f)
    ioc = st["ioctl"]
    return ioc["lookups"], ioc["xfer"]["gets"], ioc["xfer"]["puts"]


class GetPutManyTest(unittest.TestCase):
    def setUp(self):
        self.c = kvfs.Connector(base.MNT, "py.xfer", chunk_tokens=4)

    def tearDown(self):
        self.c.close()

    def test_roundtrip_buffer_kinds(self):
        keys = kvfs.keys(range(4 * 5), 4, seed=101)
        n = 8192
        srcs = [data(0, n), bytearray(data(1, n)), memoryview(data(2, n))]
        if np is not None:
            srcs.append(np.frombuffer(data(3, n), dtype=np.uint8))
        else:
            srcs.append(data(3, n))
        m = mmap.mmap(-1, n)
        m[:] = data(4, n)
        srcs.append(m)
        self.assertEqual(self.c.put_many(keys, srcs), [True] * 5)
        self.assertEqual(self.c.put_many(keys[:2], srcs[:2]), [False] * 2)

        outs = [bytearray(n), memoryview(bytearray(n)), mmap.mmap(-1, n)]
        if np is not None:
            outs.append(np.zeros(n // 2, dtype=np.uint16))  # 2-byte items
        else:
            outs.append(bytearray(n))
        outs.append(bytearray(n))
        self.assertEqual(self.c.get_many(keys, outs), [n] * 5)
        for i, o in enumerate(outs):
            self.assertEqual(bytes(memoryview(o).cast("B")), data(i, n))
        m.close()
        outs[2].close()
        # the files read the same through read(2)
        self.assertEqual(self.c.get(keys[3]), data(3, n))

    def test_ranges_and_per_key_results(self):
        keys = kvfs.keys(range(4 * 4), 4, seed=102)
        n = 4096
        self.assertEqual(self.c.put_many(keys[:3], [data(i, n)
                                                    for i in range(3)]),
                         [True] * 3)
        outs = [bytearray(100), bytearray(n), bytearray(n - 1),
                bytearray(n), bytearray(10)]
        res = self.c.get_many([keys[0], keys[1], keys[2], keys[3], keys[0]],
                              outs, offsets=[1000, 0, 0, 0, n - 5],
                              lengths=[100, 0, 0, 0, 10])
        self.assertEqual(res[0], 100)
        self.assertEqual(bytes(outs[0]), data(0, n)[1000:1100])
        self.assertEqual(res[1], n)
        self.assertIsInstance(res[2], OSError)
        self.assertEqual(res[2].errno, errno.EMSGSIZE)
        self.assertIsNone(res[3])  # a miss
        self.assertIsInstance(res[4], OSError)
        self.assertEqual(res[4].errno, errno.ERANGE)

    def test_many_batches_and_ioctl_count(self):
        """lookup + get_many of a 1,024-chunk prompt in at most 8 ioctls."""
        keys = kvfs.keys(range(4 * 1024), 4, seed=103)
        n = 1024
        bufs = [bytes([i & 0xFF]) * n for i in range(1024)]
        self.assertEqual(self.c.put_many(keys, bufs), [True] * 1024)
        outs = [bytearray(n) for _ in range(1024)]
        l0, g0, _ = ioctl_stats()
        res = self.c.lookup(keys)
        self.assertEqual(res.found, 1024)
        self.assertEqual(self.c.get_many(keys, outs), [n] * 1024)
        l1, g1, _ = ioctl_stats()
        self.assertLessEqual((l1 - l0) + (g1 - g0), 8)
        self.assertEqual((l1 - l0, g1 - g0), (2, 5))
        for i, o in enumerate(outs):
            self.assertEqual(o, bufs[i])

    def test_bad_arguments(self):
        keys = kvfs.keys(range(8), 4, seed=104)
        with self.assertRaises(ValueError):
            self.c.get_many(keys, [bytearray(4)])
        with self.assertRaises(ValueError):
            self.c.put_many([keys[0], keys[0]], [b"a", b"b"])
        with self.assertRaises(TypeError):  # read-only destination
            self.c.get_many(keys[:1], [b"x" * 10])
        with self.assertRaises(TypeError):
            self.c.put_many(keys[:1], [12345])
        with self.assertRaises(TypeError):
            self.c.put_many(keys[:1], ["not bytes"])  # str: no buffer
        if np is not None:
            a = np.zeros((8, 8), dtype=np.uint8)[:, ::2]
            with self.assertRaises(ValueError):  # not contiguous
                self.c.put_many(keys[:1], [a])
        self.assertEqual(self.c.get_many([], []), [])

    def test_efbig(self):
        """Above max_chunk (64 MiB on this mount): EFBIG for that key
        alone; the other key of the batch is stored."""
        keys = kvfs.keys(range(8), 4, seed=105)
        big = bytearray((64 << 20) + 1)
        res = self.c.put_many(keys, [b"small", big])
        self.assertIs(res[0], True)
        self.assertIsInstance(res[1], OSError)
        self.assertEqual(res[1].errno, errno.EFBIG)
        self.assertFalse(self.c.exists(keys[1]))

    def test_killed_caller(self):
        """A Python process SIGKILLed in the middle of get_many loops: the
        daemon serves on and keeps nothing pinned."""
        keys = kvfs.keys(range(4 * 8), 4, seed=107)
        n = 1 << 20
        self.c.put_many(keys, [data(i, 64) * (n // 64) for i in range(8)])
        code = ("import sys; sys.path.insert(0, %r); import kvfs\n"
                "c = kvfs.Connector(%r, 'py.xfer')\n"
                "keys = [bytes.fromhex(k) for k in %r]\n"
                "outs = [bytearray(%d) for _ in keys]\n"
                "print('go', flush=True)\n"
                "while True: c.get_many(keys, outs)\n"
                % (os.path.join(base.REPO, "python"), base.MNT,
                   [k.hex() for k in keys], n))
        p = subprocess.Popen([sys.executable, "-c", code],
                             stdout=subprocess.PIPE)
        self.assertEqual(p.stdout.readline().strip(), b"go")
        time.sleep(0.3)
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
        self.assertEqual(base.wait_refs("py.xfer", keys, 0), [0] * 8)
        outs = [bytearray(n) for _ in keys]
        self.assertEqual(self.c.get_many(keys, outs), [n] * 8)


if __name__ == "__main__":
    if not os.access(base.MOUNT_BIN, os.X_OK):
        print("skip: %s is not built" % base.MOUNT_BIN)
        sys.exit(77)
    try:
        lib = kvfs.load_library()
    except OSError as e:
        print("skip: %s" % e)
        sys.exit(77)
    unittest.main()
