#!/usr/bin/python3
"""A SIGKILLed daemon leaves a dead mount; kvfs-mount recovers it (issue
27, item 6).

kvfs-mount on a mount point whose kvfs daemon is dead ("Transport endpoint
is not connected") aborts the dead FUSE connection, detaches the mount
(lazy unmount), says so on stderr, and mounts: so a restart always works.
Also: the killed daemon itself is gone within seconds (its watchdog aborts
the connection if a thread of it was stuck in the kernel), and a dead
mount of another filesystem is left alone. Real mounts ($KVFS_MOUNT_BIN).
"""
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

pathmount.need("daemon")
BIN = pathmount.MOUNT_BIN
KEY = "0123456789abcdef0123456789abcdef"


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def wait_for(pred, secs=30):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


class DeadMountTest(unittest.TestCase):
    def setUp(self):
        self.mnt = tempfile.mkdtemp(prefix="kvfs-dead.")
        self.l2 = tempfile.mkdtemp(prefix="kvfs-dead-l2.", dir="/var/tmp")
        self.opts = "l1_size=16M,max_chunk=1M,l2_dir=" + self.l2

    def tearDown(self):
        for _ in range(3):
            if not mounted(self.mnt):
                break
            subprocess.call(["fusermount3", "-u", "-z", self.mnt],
                            stderr=subprocess.DEVNULL)
        shutil.rmtree(self.mnt, ignore_errors=True)
        shutil.rmtree(self.l2, ignore_errors=True)

    def test_restart_after_sigkill(self):
        before = os.stat(self.mnt).st_dev
        log = tempfile.TemporaryFile()
        d = subprocess.Popen([BIN, "-f", "-o", self.opts, self.mnt],
                             stderr=log)
        self.assertTrue(wait_for(lambda: d.poll() is not None or
                                 os.stat(self.mnt).st_dev != before))
        self.assertIsNone(d.poll())
        os.mkdir(os.path.join(self.mnt, "ns"))
        with open(os.path.join(self.mnt, "ns", KEY), "wb") as f:
            f.write(b"x" * 8192)
        d.send_signal(signal.SIGKILL)
        # the killed daemon goes (no thread of it left in the kernel)
        d.wait(15)
        log.close()
        with self.assertRaises(OSError) as cm:
            os.statvfs(self.mnt)
        self.assertEqual(cm.exception.errno, errno.ENOTCONN)
        # kvfs-mount again: recovers the mount point and mounts
        r = subprocess.run([BIN, "-o", self.opts, self.mnt],
                           stderr=subprocess.PIPE, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dead daemon", r.stderr)
        self.assertIn("aborted FUSE connection", r.stderr)
        self.assertIn("detached it", r.stderr)
        self.assertTrue(mounted(self.mnt))
        # working: the namespace came back from L2, new chunks go in
        ns = os.path.join(self.mnt, "ns")
        self.assertTrue(os.path.isdir(ns))
        key2 = "f" * 32
        with open(os.path.join(ns, key2), "wb") as f:
            f.write(b"y" * 4096)
        with open(os.path.join(ns, key2), "rb") as f:
            self.assertEqual(f.read(), b"y" * 4096)
        self.assertEqual(subprocess.call(["fusermount3", "-u", self.mnt]), 0)
        self.assertTrue(wait_for(lambda: not mounted(self.mnt)))

    def test_live_mount_untouched(self):
        """A mount that answers is refused as before, not recovered."""
        d = subprocess.Popen([BIN, "-f", "-o", self.opts, self.mnt],
                             stderr=subprocess.DEVNULL)
        before = os.stat("/").st_dev
        self.assertTrue(wait_for(lambda: mounted(self.mnt)))
        r = subprocess.run([BIN, "-o", self.opts, self.mnt],
                           stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is a kvfs mount already", r.stderr)
        self.assertNotIn("dead daemon", r.stderr)
        os.listdir(self.mnt)  # still answers
        subprocess.call(["fusermount3", "-u", self.mnt])
        self.assertEqual(d.wait(60), 0)
        self.assertNotEqual(before, 0)


if __name__ == "__main__":
    unittest.main()
