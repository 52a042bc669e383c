#!/usr/bin/python3
"""What df / statvfs(3) report on a kvfs mount (issue 17, item 11).

Size is L1 + L2 capacity; free (and available) is all of it but the L1
bytes nothing may evict: chunks pinned by open fds, leases, handles and
user pins, and writers in flight. So a cache that is full by design (L1
and L2 both full of evictable chunks) reports nearly everything free and
a disk-full alert stays quiet, while a mount whose L1 is pinned full,
where writes do fail with ENOSPC, reports it. Mounts real kvfs daemons
($KVFS_MOUNT_BIN) with pathmount's helper.
"""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

MIB = 1 << 20
BLK = 4096


def fill(mnt, ns, n, size=MIB):
    os.makedirs(os.path.join(mnt, ns), exist_ok=True)
    names = []
    for i in range(n):
        name = "%032x" % (0xabc000 + i)
        with open(os.path.join(mnt, ns, name), "wb") as f:
            f.write(bytes([i & 0xff]) * size)
        names.append(name)
    return names


def settled(mnt, want_free, timeout=20):
    """statvfs once f_bfree is want_free (L2 writes in flight pin their
    L1 chunk for a moment), or the last one seen."""
    deadline = time.monotonic() + timeout
    while True:
        sv = os.statvfs(mnt)
        if sv.f_bfree == want_free or time.monotonic() > deadline:
            return sv
        time.sleep(0.05)


class StatfsTest(unittest.TestCase):
    def test_l1_and_l2_full_by_design(self):
        m = pathmount.new_mount(["l1_size=16M", "max_chunk=2M",
                                 "l2_size=64M", "ingest=evicted",
                                 "flush_on_exit=0"])
        try:
            st = pathmount.stats(m.mnt)
            l1, l2 = st["l1"]["capacity"], st["l2"]["capacity"]
            self.assertGreater(l2, 0)
            sv = os.statvfs(m.mnt)
            self.assertEqual(sv.f_frsize, BLK)
            self.assertEqual(sv.f_blocks, (l1 + l2) // BLK)
            self.assertEqual(sv.f_bfree, sv.f_blocks)
            self.assertEqual(sv.f_bavail, sv.f_bfree)
            # 96 MiB of chunks through 16 MiB of L1: L1 full, L2 in use
            names = fill(m.mnt, "df", 96)
            st = pathmount.stats(m.mnt)
            self.assertGreater(st["l1"]["bytes"], l1 * 3 // 4, st["l1"])
            self.assertGreater(st["l2"]["chunks"], 0, st["l2"])
            sv = settled(m.mnt, sv.f_blocks)
            self.assertEqual(sv.f_bfree, sv.f_blocks)  # all evictable
            df = subprocess.run(["df", "--output=pcent", m.mnt],
                                capture_output=True, text=True, check=True)
            self.assertEqual(df.stdout.split()[-1], "0%", df.stdout)
            # three open readers pin three L1 chunks: 3 MiB not free
            l1_names = [n for n in reversed(names)
                        if pathmount.tier_of(os.path.join(
                            m.mnt, "df", n)) == "l1"][:3]
            self.assertEqual(len(l1_names), 3)
            fds = [os.open(os.path.join(m.mnt, "df", n), os.O_RDONLY)
                   for n in l1_names]
            try:
                sv = settled(m.mnt, sv.f_blocks - 3 * MIB // BLK)
                self.assertEqual(sv.f_blocks - sv.f_bfree, 3 * MIB // BLK)
                # the same figure an operator sees in .kvfs/stats
                self.assertEqual(
                    pathmount.stats(m.mnt)["l1"]["pinned_bytes"], 3 * MIB)
                self.assertEqual(sv.f_bavail, sv.f_bfree)
                # a writer in flight holds its bytes too
                w = open(os.path.join(m.mnt, "df", ".tmp.w"), "wb")
                w.write(b"w" * (2 * MIB))
                w.flush()
                sv2 = settled(m.mnt, sv.f_bfree - 2 * MIB // BLK)
                self.assertEqual(sv.f_bfree - sv2.f_bfree, 2 * MIB // BLK)
                w.close()
                # an unpublished temporary keeps them until it goes
                os.unlink(os.path.join(m.mnt, "df", ".tmp.w"))
            finally:
                for fd in fds:
                    os.close(fd)
            sv = settled(m.mnt, sv.f_blocks)
            self.assertEqual(sv.f_bfree, sv.f_blocks)
        finally:
            pathmount.drop_mount(m)

    def test_l1_only_pinned_full(self):
        m = pathmount.new_mount(["l1_size=8M", "max_chunk=1M"], l2=False)
        try:
            l1 = pathmount.stats(m.mnt)["l1"]["capacity"]
            sv = os.statvfs(m.mnt)
            self.assertEqual(sv.f_blocks, l1 // BLK)
            names = fill(m.mnt, "pin", 8)
            fds = []
            try:
                for n in names:  # open every chunk still cached
                    try:
                        fds.append(os.open(os.path.join(m.mnt, "pin", n),
                                           os.O_RDONLY))
                    except FileNotFoundError:
                        pass
                held = len(fds) * MIB // BLK
                self.assertGreater(held, 0)
                sv = settled(m.mnt, sv.f_blocks - held)
                self.assertEqual(sv.f_blocks - sv.f_bfree, held)
                if held * BLK >= l1:
                    # pinned full: df says so, and a write fails
                    self.assertEqual(sv.f_bavail, 0)
                    with self.assertRaises(OSError):
                        fill(m.mnt, "pin2", 1)
            finally:
                for fd in fds:
                    os.close(fd)
        finally:
            pathmount.drop_mount(m)


if __name__ == "__main__":
    pathmount.need("daemon")
    unittest.main()
