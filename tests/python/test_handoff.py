#!/usr/bin/python3
"""The hand-off from Python (kvfs(7) HAND-OFF) on a real mount:
Connector.lookup(keys, wait=SECONDS) woken by a publish from another
thread, a timeout with the leading run, get_many(keys, buffers, wait=)
with the bytes, layer_keys equal to libkvfs's kvfs_layer_keys and distinct
per layer, and `kvfsctl lookup --wait`.

Mounts its own kvfs ($KVFS_MOUNT_BIN) with pathmount's helper; loads
libkvfs.so from $KVFS_PLAIN_BUILD. Exit 77 when they are not built.
"""
import ctypes
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
LIB = os.path.join(pathmount.PLAIN, "libkvfs.so")
if "KVFS_LIB" not in os.environ and os.path.exists(LIB):
    os.environ["KVFS_LIB"] = LIB
import kvfs  # noqa: E402

M = None
CHUNK = 4096


def setUpModule():
    global M
    M = pathmount.new_mount(["l1_size=32M", "max_chunk=1M"], l2=False)


def tearDownModule():
    pathmount.drop_mount(M)


def later(delay, fn, *args):
    t = threading.Timer(delay, fn, args)
    t.start()
    return t


class HandoffTest(unittest.TestCase):
    def setUp(self):
        self.c = kvfs.Connector(M.mnt, "handoff-" + self._testMethodName,
                                chunk_tokens=16)

    def tearDown(self):
        self.c.close()

    def test_lookup_wait_woken(self):
        keys = self.c.keys(list(range(3 * 16)))
        self.assertEqual(len(keys), 3)

        def publish():
            for i, k in enumerate(keys):
                self.c.put(k, bytes([i]) * CHUNK)
        t0 = time.monotonic()
        t = later(0.2, publish)
        res = self.c.lookup(keys, wait=10)
        t.join()
        self.assertEqual(res.found, 3)
        self.assertLess(time.monotonic() - t0, 5)

    def test_lookup_wait_timeout_partial(self):
        keys = self.c.keys(list(range(100, 100 + 3 * 16)))
        self.c.put(keys[0], b"a" * CHUNK)
        t0 = time.monotonic()
        res = self.c.lookup(keys, wait=0.3)
        took = time.monotonic() - t0
        self.assertEqual(res.found, 1)
        self.assertGreaterEqual(took, 0.28)
        self.assertLess(took, 3)
        # pins are taken when the wait ends: ordinary leases
        later(0.1, self.c.put, keys[1], b"b" * CHUNK).join()
        res = self.c.lookup(keys[:2], wait=1, pin=True)
        self.assertEqual(res.found, 2)
        self.assertEqual(len(res.leases), 1)
        self.c.release(res)

    def test_get_many_wait(self):
        keys = self.c.keys(list(range(200, 200 + 2 * 16)))
        bufs = [bytearray(CHUNK) for _ in keys]
        t = later(0.2, lambda: [self.c.put(k, bytes([7 + i]) * CHUNK)
                                for i, k in enumerate(keys)])
        out = self.c.get_many(keys, bufs, wait=10)
        t.join()
        self.assertEqual(out, [CHUNK, CHUNK])
        self.assertEqual(bytes(bufs[1]), bytes([8]) * CHUNK)
        # a key that never comes: None at the timeout
        more = self.c.keys(list(range(300, 300 + 16)))
        self.assertEqual(self.c.get_many(more, [bytearray(CHUNK)],
                                         wait=0.2), [None])

    def test_layer_keys(self):
        toks = list(range(64))
        lib = kvfs.load_library()
        out = (kvfs.Key * 4)()
        arr = (ctypes.c_uint32 * 64)(*toks)
        lib.kvfs_layer_keys.restype = ctypes.c_long
        lib.kvfs_layer_keys.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
            ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint32,
            ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]
        self.assertEqual(lib.kvfs_layer_keys(arr, 64, 16, 5, None, 0, 31,
                                             out, 4), 4)
        py = kvfs.layer_keys(toks, 16, 31, seed=5)
        self.assertEqual(py, [bytes(out[i].b) for i in range(4)])
        self.assertNotEqual(kvfs.layer_keys(toks, 16, 0, seed=5), py)
        self.assertNotEqual(kvfs.keys(toks, 16, seed=5), py)
        self.assertEqual(kvfs.layer_keys(toks, 16, 3, extra=b"lora"),
                         kvfs.keys(toks, 16, extra=b"lora" + b"kvfs.layer" +
                                   (3).to_bytes(4, "little")))
        with self.assertRaises(ValueError):
            kvfs.layer_keys(toks, 16, -1)

    def test_kvfsctl_lookup_wait(self):
        keys = self.c.keys(list(range(400, 400 + 2 * 16)))
        hexes = "\n".join(k.hex() for k in keys) + "\n"
        nsdir = os.path.join(M.mnt, self.c.namespace)
        t = later(0.3, lambda: [self.c.put(k, b"x" * CHUNK) for k in keys])
        t0 = time.monotonic()
        p = subprocess.run([pathmount.CTL_BIN, "lookup", "--wait", "10",
                            nsdir], input=hexes, capture_output=True,
                           text=True, timeout=30)
        t.join()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("found=2 keys=2", p.stdout)
        self.assertLess(time.monotonic() - t0, 8)
        p = subprocess.run([pathmount.CTL_BIN, "lookup", "--wait", "x",
                            nsdir], input=hexes, capture_output=True,
                           text=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("bad --wait", p.stderr)


if __name__ == "__main__":
    pathmount.need("daemon")
    if not os.path.exists(os.environ.get("KVFS_LIB", LIB)):
        print("skip: no libkvfs.so")
        sys.exit(77)
    unittest.main()
