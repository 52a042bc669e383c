#!/usr/bin/python3
"""kvfs-mount stops on SIGTERM, SIGINT and SIGHUP with requests in flight.

Eight processes create and write files (each create holds the namespace
directory's lock while it waits for the daemon) and four read, when the
daemon is told to stop. Its background thread sends the kernel entry
invalidations for the files just published, and an invalidation waits,
uninterruptibly, for that same directory lock. Before, libfuse's stop
ended the serving threads at once: a create caught in flight was never
answered, the invalidation waited for ever, the daemon (joining that
thread) never exited, and every process touching the mount hung in D
state (found by review 11: p06_stop_inflight, /dev/fuse transport).
The same in a path namespace (names=paths), where the close of an
O_TRUNC rewrite of a published file invalidates the name's entry from the
FLUSH handler itself (fs/paths/fs_psuper.c): hung 3 of 4 stops before
(review 12). Now a stop first quiesces (fs_quiesce: no handler starts an
invalidation, those in flight and the background thread end) while
requests are still served (mount/mount_stop.c). Checks: the daemon exits
0 within 20 s, every load process ends within 20 s (none left in D
state), nothing stays mounted. Real mounts ($KVFS_MOUNT_BIN), the classic
/dev/fuse transport (fuse_uring=off) and, where the fuse module offers
it, the rings. And a stop signal the parent left ignored (nohup) stays
ignored, as with libfuse's handlers.
"""
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
URING = "/sys/module/fuse/parameters/enable_uring"

LOAD = r'''
import errno, os, sys, time
d, kind, i = sys.argv[1], sys.argv[2], int(sys.argv[3])
end = time.monotonic() + 60
n = 0
while time.monotonic() < end:
    try:
        if kind == "r":
            with open(os.path.join(d, "%032x" % (i % 4)), "rb") as f:
                f.read()
        elif kind == "t":  # an O_TRUNC rewrite of a published path file
            with open(os.path.join(d, "f%d" % (n % 8)), "wb") as f:
                f.write(b"t" * 4096)
            n += 1
        elif kind == "s":
            os.listdir(d)
        elif kind == "p":  # a new path file
            n += 1
            with open(os.path.join(d, "c%d_%d_%d" % (i, os.getpid(), n)),
                      "wb") as f:
                f.write(b"c" * 4096)
        else:
            n += 1
            p = os.path.join(d, "%016x%08x%08x" % (1000 + i, os.getpid(), n))
            with open(p, "wb") as f:
                f.write(b"w" * 300000)
    except OSError as e:
        # the mount went away: what a stop looks like; anything else (a
        # file evicted under the writers, L1 full) and the loop goes on
        if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.ECANCELED,
                       errno.ENODEV, errno.ENOENT if not os.path.isdir(d)
                       else -1):
            sys.exit(0)
        time.sleep(0.001)
'''


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def conn_of(path):
    """The FUSE connection number (the mount's minor) or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            w = line.split()
            if w[4] == path:
                return int(w[2].split(":")[1])
    return None


def stacks(pid):
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                    st = f.read().split()[2]
                with open("/proc/%d/task/%s/stack" % (pid, t)) as f:
                    top = f.readline().strip()
            except OSError:
                continue
            out.append("%s %s %s" % (t, st, top))
    except OSError:
        pass
    return "; ".join(out)


class StopUnderLoadTest(unittest.TestCase):
    def setUp(self):
        self.mnt = tempfile.mkdtemp(prefix="kvfs-stop.")
        self.load = []
        self.daemon = None

    def tearDown(self):
        for p in self.load:
            if p.poll() is None:
                p.kill()
        if mounted(self.mnt):
            c = conn_of(self.mnt)
            if c is not None:  # a stuck daemon: free the callers
                try:
                    with open("/sys/fs/fuse/connections/%d/abort" % c,
                              "w") as f:
                        f.write("1")
                except OSError:
                    pass
            subprocess.call(["fusermount3", "-u", "-z", self.mnt],
                            stderr=subprocess.DEVNULL)
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.kill()
            self.daemon.wait()
        for p in self.load:
            p.wait()
        shutil.rmtree(self.mnt, ignore_errors=True)

    def start(self, opts, ignore=None):
        before = os.stat(self.mnt).st_dev
        log = tempfile.TemporaryFile()
        self.addCleanup(log.close)
        self.daemon = subprocess.Popen(
            [BIN, "-f", "-o", "l1_size=64M," + opts, self.mnt],
            stderr=log, preexec_fn=None if ignore is None else
            (lambda: signal.signal(ignore, signal.SIG_IGN)))
        deadline = time.monotonic() + 30
        while (self.daemon.poll() is None and
               os.stat(self.mnt).st_dev == before and
               time.monotonic() < deadline):
            time.sleep(0.02)
        self.assertIsNone(self.daemon.poll(), "the mount failed")
        return log

    def stop_under_load(self, sig, uring, paths=False):
        log = self.start("fuse_uring=" + uring +
                         (",names=paths" if paths else ""))
        ns = os.path.join(self.mnt, "ns")
        os.mkdir(ns)
        if paths:  # published files to rewrite, in a directory of theirs
            ns = os.path.join(ns, "a", "b")
            os.makedirs(ns)
            for i in range(8):
                with open(os.path.join(ns, "f%d" % i), "wb") as f:
                    f.write(b"x" * 4096)
            time.sleep(0.6)
            kinds = (("t", 5), ("p", 3), ("s", 2))
        else:
            for i in range(4):
                with open(os.path.join(ns, "%032x" % i), "wb") as f:
                    f.write(os.urandom(1 << 20))
            kinds = (("w", 8), ("r", 4))
        ncpu = os.cpu_count() or 1
        for kind, n in kinds:
            for i in range(n):
                self.load.append(subprocess.Popen(
                    ["taskset", "-c", str(i % ncpu), sys.executable, "-c",
                     LOAD, ns, kind, str(i)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.5)
        self.assertTrue(all(p.poll() is None for p in self.load),
                        "a load process ended before the stop")
        self.daemon.send_signal(sig)
        try:
            rc = self.daemon.wait(20)
        except subprocess.TimeoutExpired:
            self.fail("%s: the daemon did not exit in 20 s (threads: %s)" %
                      (signal.Signals(sig).name, stacks(self.daemon.pid)))
        log.seek(0)
        self.assertEqual(rc, 0, log.read().decode(errors="replace")[-600:])
        deadline = time.monotonic() + 20
        while (any(p.poll() is None for p in self.load) and
               time.monotonic() < deadline):
            time.sleep(0.05)
        stuck = [stacks(p.pid) for p in self.load if p.poll() is None]
        self.assertEqual(stuck, [], "load processes still running")
        self.assertFalse(mounted(self.mnt))

    def test_sigterm_with_creates_in_flight(self):
        self.stop_under_load(signal.SIGTERM, "off")

    def test_sigint_with_creates_in_flight(self):
        self.stop_under_load(signal.SIGINT, "off")

    def test_sighup_with_creates_in_flight(self):
        self.stop_under_load(signal.SIGHUP, "off")

    def test_sigterm_paths_rewrites_in_flight(self):
        self.stop_under_load(signal.SIGTERM, "off", paths=True)

    def test_sigterm_paths_rewrites_in_flight_again(self):
        # (the hang came 3 stops in 4: twice, so a regression shows)
        self.stop_under_load(signal.SIGTERM, "off", paths=True)

    def test_ignored_stop_signals_stay_ignored(self):
        for sig in (signal.SIGHUP, signal.SIGINT):
            with self.subTest(sig=signal.Signals(sig).name):
                self.start("fuse_uring=off", ignore=sig)
                self.daemon.send_signal(sig)
                time.sleep(0.5)
                self.assertIsNone(self.daemon.poll(),
                                  "a stop signal its parent ignored "
                                  "stopped it")
                self.assertTrue(mounted(self.mnt))
                self.daemon.send_signal(signal.SIGTERM)
                self.assertEqual(self.daemon.wait(20), 0)
                self.assertFalse(mounted(self.mnt))

    def test_sigterm_with_creates_in_flight_rings(self):
        try:
            with open(URING) as f:
                was = f.read().strip()
        except OSError:
            self.skipTest("this kernel's fuse has no io_uring (%s)" % URING)
        try:
            if was != "Y":
                with open(URING, "w") as f:
                    f.write("Y")
            self.stop_under_load(signal.SIGTERM, "on")
        finally:
            if was != "Y":
                with open(URING, "w") as f:
                    f.write(was)


if __name__ == "__main__":
    unittest.main()
