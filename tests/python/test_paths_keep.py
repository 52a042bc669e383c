#!/usr/bin/python3
"""evict=never path namespaces (issue 27, item 7): files leave only when
deleted.

LMCache's local disk backend keeps its own index of the chunks it wrote
and trusts it: a file the cache evicted is wrong KV for the engine. A
path namespace with user.kvfs.evict=never keeps its files through
pressure that evicts others (with L2: they are demoted from L1 to L2,
never dropped; without L2: they stay in L1); past user.kvfs.quota_bytes a
write fails with ENOSPC as on a full disk, and an unlink gives the room
back. The mode and quota survive a warm restart. Bad values are EINVAL.
Real mounts ($KVFS_MOUNT_BIN), plain syscalls.
"""
import errno
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
from pathmount import BLOCK  # noqa: E402

pathmount.need("daemon")
pathmount.need("numpy")
import numpy as np  # noqa: E402

EVICT = "user.kvfs.evict"
QUOTA = "user.kvfs.quota_bytes"


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def fill_others(m, ns, n, seed):
    """n blocks into a policy namespace ns: pressure (random bytes, which
    L2 cannot compress)."""
    d = os.path.join(m.mnt, ns)
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        write(os.path.join(d, "o%04d.bin" % i), os.urandom(BLOCK))


def keep_ns(m, name, quota=None):
    d = os.path.join(m.mnt, name)
    os.mkdir(d)
    os.setxattr(d, EVICT, b"never")
    if quota is not None:
        os.setxattr(d, QUOTA, str(quota).encode())
    return d


class KeepTest(unittest.TestCase):
    def survive(self, m, others, quota, files):
        d = keep_ns(m, "lmc", quota)
        want = {}
        for i in range(files):
            data = pathmount.kv_block(100 + i).tobytes()
            write(os.path.join(d, "k%d.pt" % i), data)
            want["k%d.pt" % i] = data
        fill_others(m, "vllm", others, 1000)
        st = pathmount.stats(m.mnt)
        evicted = sum(1 for i in range(others) if not os.path.exists(
            os.path.join(m.mnt, "vllm", "o%04d.bin" % i)))
        self.assertGreater(evicted, 0, "no pressure: nothing was evicted")
        # (before reading: a read promotes an L2 file back to L1)
        self.tiers = {pathmount.tier_of(os.path.join(d, n)) for n in want}
        for name, data in want.items():
            p = os.path.join(d, name)
            self.assertTrue(os.path.exists(p), "%s was evicted from an "
                            "evict=never namespace" % name)
            self.assertEqual(read(p), data, name)
        return st

    def test_survive_pressure_with_l2(self):
        # L1 24M + L2 256M; 160 blocks of others (320 MiB) pass through
        m = pathmount.new_mount()
        try:
            self.survive(m, 180, 8 * BLOCK, 6)
            self.assertIn("l2", self.tiers, "never demoted to L2")
            # a warm restart keeps the mode, the quota and the files
            m.remount()
            d = os.path.join(m.mnt, "lmc")
            self.assertEqual(os.getxattr(d, EVICT), b"never")
            self.assertEqual(os.getxattr(d, QUOTA), str(8 * BLOCK).encode())
            self.assertEqual(len(os.listdir(d)), 6)
            self.assertEqual(os.getxattr(os.path.join(m.mnt, "vllm"), EVICT),
                             b"policy")
        finally:
            pathmount.drop_mount(m)

    def test_survive_pressure_without_l2(self):
        m = pathmount.new_mount(l2=False)
        try:
            # 80 MiB through a 24 MiB L1; quota at most half of it
            self.survive(m, 40, 5 * BLOCK, 5)
        finally:
            pathmount.drop_mount(m)

    def test_quota_enospc_and_unlink(self):
        m = pathmount.new_mount()
        try:
            d = keep_ns(m, "q", 3 * BLOCK)
            for i in range(3):
                write(os.path.join(d, "f%d" % i),
                      pathmount.kv_block(i).tobytes())
            with self.assertRaises(OSError) as cm:
                write(os.path.join(d, "f3"), pathmount.kv_block(3).tobytes())
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
            if os.path.exists(os.path.join(d, "f3")):
                os.unlink(os.path.join(d, "f3"))
            # a policy namespace beside it is not limited
            fill_others(m, "free", 8, 50)
            # unlink frees quota
            os.unlink(os.path.join(d, "f0"))
            data = pathmount.kv_block(9).tobytes()
            write(os.path.join(d, "f9"), data)
            self.assertEqual(read(os.path.join(d, "f9")), data)
            # lowering the quota below what is held: writes fail until
            # deletes bring it under
            os.setxattr(d, QUOTA, str(BLOCK).encode())
            with self.assertRaises(OSError) as cm:
                write(os.path.join(d, "g"), b"x" * 4096)
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
            if os.path.exists(os.path.join(d, "g")):
                os.unlink(os.path.join(d, "g"))
            for n in ("f1", "f2", "f9"):
                os.unlink(os.path.join(d, n))
            write(os.path.join(d, "g"), b"x" * 4096)
            # back to policy: no quota
            os.setxattr(d, EVICT, b"policy")
            with self.assertRaises(OSError) as cm:
                os.getxattr(d, QUOTA)
            self.assertEqual(cm.exception.errno, errno.ENODATA)
            write(os.path.join(d, "big"), np.zeros(2 * BLOCK,
                                                   np.uint8).tobytes())
        finally:
            pathmount.drop_mount(m)

    def test_bad_values(self):
        m = pathmount.new_mount()
        try:
            d = os.path.join(m.mnt, "bad")
            os.mkdir(d)
            self.assertEqual(os.getxattr(d, EVICT), b"policy")
            self.assertNotIn(QUOTA, os.listxattr(d))
            for attr, val in ((EVICT, b"sometimes"), (EVICT, b""),
                              (QUOTA, b"100"),          # while policy
                              (QUOTA, b"-1")):
                with self.assertRaises(OSError, msg=(attr, val)) as cm:
                    os.setxattr(d, attr, val)
                self.assertEqual(cm.exception.errno, errno.EINVAL,
                                 (attr, val))
            os.setxattr(d, EVICT, b"never")
            self.assertIn(QUOTA, os.listxattr(d))
            # the largest allowed: half of L2 (256M)
            self.assertEqual(int(os.getxattr(d, QUOTA)), 128 << 20)
            for val in (b"abc", str((128 << 20) + 1).encode()):
                with self.assertRaises(OSError) as cm:
                    os.setxattr(d, QUOTA, val)
                self.assertEqual(cm.exception.errno, errno.EINVAL, val)
            # the others' quotas leave no room: ENOSPC
            d2 = os.path.join(m.mnt, "bad2")
            os.mkdir(d2)
            with self.assertRaises(OSError) as cm:
                os.setxattr(d2, EVICT, b"never")
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
            os.setxattr(d, QUOTA, str(64 << 20).encode())
            os.setxattr(d2, EVICT, b"never")
            self.assertEqual(int(os.getxattr(d2, QUOTA)), 64 << 20)
            # a key namespace has no such mode
            k = os.path.join(m.mnt, "keys")
            os.mkdir(k)
            os.setxattr(k, "user.kvfs.names", b"keys")
            with self.assertRaises(OSError) as cm:
                os.setxattr(k, EVICT, b"never")
            self.assertEqual(cm.exception.errno, errno.EINVAL)
        finally:
            pathmount.drop_mount(m)


if __name__ == "__main__":
    unittest.main()
