#!/usr/bin/python3
"""Tests of Connector.get_many / put_many (batched transfers) on a real
mount: every kind of buffer (bytes, bytearray, memoryview, numpy, mmap,
kvfs.buffer's huge pages),
byte ranges, per-key results (miss, EMSGSIZE, ERANGE, EEXIST, EFBIG),
batches longer than one ioctl, bad arguments, and a killed caller.

Mounts through test_kvfs's helpers (same daemon, same unmount safety net).
Exit 77 (skip) when the daemon or the library is not built.
"""
import errno
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
        """lookup + get_many of a 1,024-chunk prompt in 6 ioctls: the
        lookup is one (the chain by address), the GETs 5 of 240."""
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
        self.assertEqual((l1 - l0, g1 - g0), (1, 5))
        for i, o in enumerate(outs):
            self.assertEqual(o, bufs[i])

    def test_lookup_by_address(self):
        """Chains longer than one struct's 512 keys go by address: 1,100
        keys with the first 700 present are one ioctl (found 700, one
        lease with pin), 3,000 present one too."""
        keys = kvfs.keys(range(4 * 3000), 4, seed=109)
        self.assertEqual(self.c.put_many(keys[:700], [b"k"] * 700),
                         [True] * 700)
        l0, _, _ = ioctl_stats()
        res = self.c.lookup(keys[:1100], pin=True)
        l1, _, _ = ioctl_stats()
        self.assertEqual((res.found, res.in_l1, l1 - l0), (700, 700, 1))
        self.assertEqual(len(res.leases), 1)
        self.assertEqual(base.refs("py.xfer", keys[699]), 1)
        self.c.release(res)
        self.assertEqual(base.wait_refs("py.xfer", keys[:1], 0), [0])
        self.assertEqual(self.c.put_many(keys[700:], [b"k"] * 2300),
                         [True] * 2300)
        l0, _, _ = ioctl_stats()
        res = self.c.lookup(keys)
        l1, _, _ = ioctl_stats()
        self.assertEqual((res.found, l1 - l0), (3000, 1))
        # depths past 2**32 - 1: ValueError, and no later chain loses
        # its by-address round trip for it (the binding took the
        # daemon's EINVAL for an old daemon's refusal)
        for depth in (2**32 - 2, -1):
            with self.assertRaises(ValueError):
                self.c.lookup(keys[:600], depth_base=depth)
        l0, _, _ = ioctl_stats()
        self.assertEqual(self.c.lookup(keys).found, 3000)
        self.assertEqual(ioctl_stats()[0] - l0, 1)
        # a gap past the first 512: the run stops there
        res = self.c.lookup(keys[:600] + kvfs.keys(range(8), 4, seed=110))
        self.assertEqual(res.found, 600)
        # hex names, a generator, keys of mixed kinds: the same chain
        self.assertEqual(self.c.lookup([k.hex() for k in keys]).found, 3000)
        self.assertEqual(self.c.lookup(k for k in keys).found, 3000)
        mixed = [k.hex() if i % 3 == 0 else bytearray(k) if i % 3 == 1
                 else k for i, k in enumerate(keys[:700])]
        self.assertEqual(self.c.lookup(mixed).found, 700)
        # a bad key anywhere: nothing is looked up
        l0, _, _ = ioctl_stats()
        for bad, exc in ((keys[5][:15], ValueError), ("zz" * 16, ValueError),
                         (12, TypeError)):
            with self.assertRaises(exc):
                self.c.lookup(keys[:5] + [bad] + keys[6:700])
        # 15 + 17 bytes are 32, but neither is a key
        with self.assertRaises(ValueError):
            self.c.lookup([keys[0][:15], keys[1] + b"x"])
        self.assertEqual(ioctl_stats()[0], l0)

    def test_lookup_by_address_refused(self):
        """A daemon that may not read the caller's memory (no
        CAP_SYS_PTRACE, the caller root with it) refuses a chain by
        address with EPERM: the binding looks the same chain up in parts
        of 512, right, and does so from then on without asking again."""
        if os.geteuid() != 0 or not os.access("/usr/bin/setpriv", os.X_OK):
            self.skipTest("needs root and setpriv")
        wrap = tempfile.mkdtemp(prefix="kvfs-pyxfer.")
        mnt = tempfile.mkdtemp(prefix="kvfs-pyxfer.")
        script = os.path.join(wrap, "kvfs-mount")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexec /usr/bin/setpriv --inh-caps=-sys_ptrace"
                    " --bounding-set=-sys_ptrace -- %s \"$@\"\n"
                    % os.path.abspath(base.MOUNT_BIN))
        os.chmod(script, 0o755)
        before = os.stat(mnt).st_dev
        daemon = subprocess.Popen([script, "-f", "-o", "l1_size=32M", mnt])
        try:
            deadline = time.monotonic() + 30
            while os.stat(mnt).st_dev == before:
                self.assertIsNone(daemon.poll())
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.01)
            code = (
                "import json, os, sys; sys.path.insert(0, %r); import kvfs\n"
                "def n():\n"
                "    with open(os.path.join(%r, '.kvfs', 'stats')) as f:\n"
                "        i = json.load(f)['ioctl']\n"
                "    return i['lookups'] * 1000 + i['errors']\n"
                "c = kvfs.Connector(%r, 'py.at')\n"
                "keys = kvfs.keys(range(4 * 1100), 4, seed=111)\n"
                "for k in keys: c.put(k, b'x')\n"
                "out = []\n"
                "for _ in range(2):\n"
                "    a = n(); r = c.lookup(keys); out += [r.found, n() - a]\n"
                "b = bytearray(4)\n"
                "out += [c.get(keys[7], b), c.get(keys[7], b), bytes(b[:1])]\n"
                "print(out)\n"
                % (os.path.join(base.REPO, "python"), mnt, mnt))
            r = subprocess.run([sys.executable, "-c", code],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            # 3 parts and the refused call (an error); then 3 parts;
            # get(key, out): refused by GET once, then read through the
            # file, right both times
            self.assertEqual(r.stdout.strip(),
                             "[1100, 3001, 1100, 3000, 1, 1, b'x']")
        finally:
            subprocess.call(["fusermount3", "-u", mnt],
                            stderr=subprocess.DEVNULL)
            daemon.wait(30)
            os.rmdir(mnt)
            shutil.rmtree(wrap)

    def test_get_into_is_one_ioctl(self):
        """Connector.get(key, out): one KVFS_IOC_GET, no open of the
        file; a miss is None, a short buffer ValueError naming both
        sizes, a read-only one TypeError, and the bytes are the chunk's."""
        import json
        keys = kvfs.keys(range(4 * 2), 4, seed=112)
        self.c.put(keys[0], data(5, 5000))

        def counts():
            with open(os.path.join(base.MNT, ".kvfs", "stats")) as f:
                st = json.load(f)
            return st["ioctl"]["xfer"]["gets"], st["requests"]["open"]
        out = bytearray(8192)
        g0, o0 = counts()
        self.assertEqual(self.c.get(keys[0], out), 5000)
        self.assertEqual(bytes(out[:5000]), data(5, 5000))
        self.assertIsNone(self.c.get(keys[1], out))
        g1, o1 = counts()
        self.assertEqual((g1 - g0, o1 - o0), (2, 0))
        with self.assertRaises(ValueError) as cm:
            self.c.get(keys[0], bytearray(4999))
        self.assertIn("5000 bytes, the buffer 4999", str(cm.exception))
        with self.assertRaises(TypeError):
            self.c.get(keys[0], b"x" * 8192)
        if np is not None:
            a = np.zeros(5000, dtype=np.uint8)
            self.assertEqual(self.c.get(keys[0], a), 5000)
            self.assertEqual(a.tobytes(), data(5, 5000))

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
        with self.assertRaises(ValueError):  # not contiguous
            self.c.get_many(keys[:1], [memoryview(bytearray(20))[::2]])
        # ranges outside the 64-bit fields (ctypes cut 2**64 + 5 to 5),
        # and ranges that are no integers (int() cut 1.9 to 1)
        for off, ln in ((2**64 + 5, 0), (-1, 0), (0, 2**64), (0, -1)):
            with self.assertRaises(ValueError):
                self.c.get_many(keys[:1], [bytearray(8)], offsets=[off],
                                lengths=[ln])
        for off in (1.9, "8"):
            with self.assertRaises(TypeError):
                self.c.get_many(keys[:1], [bytearray(8)], offsets=[off])
        if np is not None:
            a = np.zeros((8, 8), dtype=np.uint8)[:, ::2]
            with self.assertRaises(ValueError):  # not contiguous
                self.c.put_many(keys[:1], [a])
            with self.assertRaises(ValueError):
                self.c.get_many(keys[:1], [a])
            # read-only numpy (np.frombuffer of bytes): the same
            # TypeError as bytes, whatever numpy itself raises
            with self.assertRaises(TypeError):
                self.c.get_many(keys[:1], [np.frombuffer(b"x" * 8,
                                                         np.uint8)])
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


def huge_kb(addr):
    """AnonHugePages (kB) of this process's mapping holding addr."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return -1


def thp_on():
    """Huge pages on madvise, compacted for at the fault (as
    kvfs_test_thp_on): where AnonHugePages may be expected."""
    def selected(name):
        with open("/sys/kernel/mm/transparent_hugepage/" + name) as f:
            t = f.read()
        return t[t.index("[") + 1:t.index("]")] if "[" in t else ""
    try:
        return selected("enabled") in ("always", "madvise") and \
            selected("defrag") in ("always", "defer+madvise", "madvise")
    except OSError:
        return False


class BufferTest(unittest.TestCase):
    """kvfs.buffer: transfer buffers in huge pages."""

    def setUp(self):
        self.c = kvfs.Connector(base.MNT, "py.xbuf", chunk_tokens=4)

    def tearDown(self):
        self.c.close()

    def test_shape(self):
        import ctypes
        n = (5 << 20) + 3
        b = kvfs.buffer(n)
        self.assertEqual((len(b), b.format, b.readonly), (n, "B", False))
        self.assertEqual(bytes(b[:4096]), bytes(4096))
        self.assertEqual(b[n - 1], 0)
        b[n - 1] = 7
        addr = ctypes.addressof(ctypes.c_char.from_buffer(b))
        self.assertEqual(addr % kvfs.HUGE_PAGE, 0)
        kb = huge_kb(addr)
        self.assertGreaterEqual(kb, 0)
        if thp_on():
            self.assertGreaterEqual(kb, 2048)
        if np is not None:
            a = np.frombuffer(b, dtype=np.uint16, count=n // 2)
            self.assertEqual(int(a[:100].sum()), 0)

    def test_bad_arguments(self):
        for bad in (0, -1):
            with self.assertRaises(ValueError):
                kvfs.buffer(bad)
        for bad in (2.0, "4096", None, True):
            with self.assertRaises(TypeError):
                kvfs.buffer(bad)
        with open("/proc/sys/vm/overcommit_memory") as f:
            counted = f.read().strip() != "1"
        if counted:  # the kernel refuses what it could not commit
            with self.assertRaises(MemoryError):  # 64 TiB, not an OOM
                kvfs.buffer(1 << 46)

    def test_get_put_many(self):
        """Chunks of 3 MiB + 5 at odd offsets of one buffer (each crosses
        a huge page) through put_many, back through get_many into
        another; the bytes around each chunk untouched."""
        keys = kvfs.keys(range(4 * 4), 4, seed=108)
        size, stride = (3 << 20) + 5, (3 << 20) + 4099
        src, dst = kvfs.buffer(4 * stride + 7), kvfs.buffer(4 * stride + 7)
        views = []
        for i in range(4):
            v = src[7 + i * stride:7 + i * stride + size]
            v[:] = data(i, 4096) * (size // 4096) + data(i, size % 4096)
            views.append(v)
        self.assertEqual(self.c.put_many(keys, views), [True] * 4)
        dst[:] = b"\xee" * len(dst)
        outs = [dst[7 + i * stride:7 + i * stride + size] for i in range(4)]
        self.assertEqual(self.c.get_many(keys, outs), [size] * 4)
        for i in range(4):
            self.assertEqual(outs[i], views[i])
            self.assertEqual(dst[7 + i * stride + size], 0xEE)
        self.assertEqual(dst[6], 0xEE)


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
