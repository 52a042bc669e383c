#!/usr/bin/python3
"""A SIGKILLed daemon leaves a dead mount; kvfs-mount recovers it (issue
27, item 6).

And a daemon killed while its invalidation thread waits in the kernel for
a directory lock (held by a client whose lookup waits on the daemon: here
a lookup that asks L3, a real redis-server stopped with SIGSTOP) is not
left stuck: its watchdog aborts the connection (before, the daemon stayed
a zombie with one thread in D state, and the mount hung, until someone
wrote to /sys/fs/fuse/connections/N/abort). The same scenario at a
clean stop (SIGTERM) with the lock held past the stop's 10 s bound: the
daemon aborts its own connection and exits.

kvfs-mount on a mount point whose kvfs daemon is dead ("Transport endpoint
is not connected") aborts the dead FUSE connection, detaches the mount
(lazy unmount), says so on stderr, and mounts: so a restart always works.
Also: the killed daemon itself is gone within seconds (its watchdog aborts
the connection if a thread of it was stuck in the kernel), and a dead
mount of another filesystem is left alone. Real mounts ($KVFS_MOUNT_BIN).
"""
import errno
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
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
        # ECONNABORTED: a request caught while the kernel tears down the
        # rings of FUSE over io_uring (fuse_uring; the rings outlive the
        # process a moment)
        self.assertIn(cm.exception.errno, (errno.ENOTCONN,
                                           errno.ECONNABORTED,
                                           errno.ECANCELED))
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


def close_quietly(f):
    try:
        f.close()  # on a dead mount: ENOTCONN
    except OSError:
        pass


def abort_conn(path):
    """What an operator does for a stuck daemon (the test's own cleanup
    when the daemon under test did not recover)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4] == path:
                minor = line.split()[2].split(":")[1]
    conn = "/sys/fs/fuse/connections"
    if not os.path.exists(os.path.join(conn, minor)):
        subprocess.call(["mount", "-t", "fusectl", "none", conn])
    with open(os.path.join(conn, minor, "abort"), "w") as f:
        f.write("1")


def on_dir_lock(pid):
    """Whether a thread of process pid sleeps in the kernel's FUSE
    invalidation, on the directory's lock (/proc's wchan names
    fuse_reverse_inval_entry, or the rwsem slow path under it)."""
    for t in glob.glob("/proc/%d/task/*/wchan" % pid):
        try:
            with open(t) as f:
                w = f.read()
            if "fuse_reverse_inval" in w or "rwsem" in w:
                return True
        except OSError:
            pass
    return False


@unittest.skipUnless(shutil.which("redis-server"), "no redis-server")
class StuckInvalidationTest(unittest.TestCase):
    def setUp(self):
        self.mnt = tempfile.mkdtemp(prefix="kvfs-stuck.")
        self.port = pathmount.free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind",
             "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertTrue(wait_for(self.redis_up, 10))

    def redis_up(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), 1) as c:
                c.sendall(b"PING\r\n")
                return c.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def tearDown(self):
        self.redis.send_signal(signal.SIGCONT)
        self.redis.kill()
        self.redis.wait()
        if mounted(self.mnt):
            subprocess.call(["umount", "-l", self.mnt])
        shutil.rmtree(self.mnt, ignore_errors=True)

    def stuck(self, opts):
        """A daemon whose background thread's invalidation waits in the
        kernel for ns's lock, held by a lookup that waits on L3 (stopped):
        (the daemon, its log, the lookup's thread)."""
        before = os.stat(self.mnt).st_dev
        log = tempfile.TemporaryFile()
        self.addCleanup(log.close)
        d = subprocess.Popen(
            [BIN, "-f", "-o", "l1_size=4M,max_chunk=1M,l3=redis://127.0.0.1:"
             "%d,%s" % (self.port, opts), self.mnt], stderr=log)
        self.assertTrue(wait_for(lambda: d.poll() is not None or
                                 os.stat(self.mnt).st_dev != before))
        ns = os.path.join(self.mnt, "ns")
        other = os.path.join(self.mnt, "other")
        os.mkdir(ns)
        os.mkdir(other)
        with open(os.path.join(ns, KEY), "wb") as f:
            f.write(b"k" * (1 << 20))
        os.stat(os.path.join(ns, KEY))  # the kernel holds its name
        time.sleep(1)                   # L3 connected
        # a lookup that waits on L3 (stopped): the kernel holds ns's lock
        self.redis.send_signal(signal.SIGSTOP)
        missing = os.path.join(ns, "e" * 32)
        th = threading.Thread(target=lambda: os.path.exists(missing),
                              daemon=True)
        th.start()
        time.sleep(0.5)
        self.assertTrue(th.is_alive(), "the lookup did not wait on L3")
        # evict KEY (writers in another namespace need its room): the
        # daemon's delete notification for it waits for ns's lock
        for i in range(4):
            f = open(os.path.join(other, ".t%d" % i), "wb")
            self.addCleanup(close_quietly, f)
            f.write(b"o" * (800 << 10))
            f.flush()
        # the eviction's notification reaches the kernel on the daemon's
        # background thread, later under load: waited for (a thread of
        # the daemon asleep on ns's lock), not assumed after a fixed nap
        self.assertTrue(wait_for(lambda: on_dir_lock(d.pid), 20),
                        "the daemon's invalidation did not wait for ns")
        return d, log, th

    def test_killed_while_invalidating(self):
        d, log, th = self.stuck("l3_timeout_ms=8000")
        d.send_signal(signal.SIGKILL)
        try:
            d.wait(10)
        except subprocess.TimeoutExpired:
            abort_conn(self.mnt)
            d.wait(10)
            self.fail("the killed daemon stayed stuck in the kernel")
        finally:
            th.join(15)
        log.seek(0)
        text = log.read().decode(errors="replace")
        # the scenario happened: the watchdog had to act
        self.assertIn("watchdog: daemon %d was killed while a thread "
                      "waited in the kernel" % d.pid, text)
        with self.assertRaises(OSError) as cm:
            os.statvfs(self.mnt)
        self.assertIn(cm.exception.errno, (errno.ENOTCONN,
                                           errno.ECONNABORTED,
                                           errno.ECANCELED))

    def test_sigterm_while_invalidating(self):
        """A stop (SIGTERM) while the background thread's invalidation
        waits for a directory lock that a client's lookup holds past the
        stop's quiescing bound (10 s: the lookup waits on a stopped L3 for
        up to 15 s): kvfs-mount aborts its FUSE connection, says so, and
        exits 1; before, a stop caught here never ended."""
        d, log, th = self.stuck("l3_timeout_ms=15000,fuse_uring=off")
        t0 = time.monotonic()
        d.send_signal(signal.SIGTERM)
        try:
            rc = d.wait(40)
        except subprocess.TimeoutExpired:
            abort_conn(self.mnt)
            d.wait(10)
            self.fail("the stopped daemon stayed stuck in the kernel")
        finally:
            th.join(20)
        self.assertEqual(rc, 1)  # callers' requests failed: not clean
        took = time.monotonic() - t0
        log.seek(0)
        text = log.read().decode(errors="replace")
        self.assertIn("stop: a kernel invalidation still waits after 10 s; "
                      "aborting the FUSE connection", text)
        self.assertGreater(took, 9, text[-400:])
        self.assertFalse(th.is_alive())


if __name__ == "__main__":
    unittest.main()
