#!/usr/bin/python3
"""FUSE requests over io_uring (kvfs-mount -o fuse_uring; issue 26).

With fuse_uring=on the daemon sets the fuse module's enable_uring (root),
answers INIT with FUSE_OVER_IO_URING and serves each possible CPU's ring
with threads of its own (mount/mount_uring.c). Here, on real mounts: the
rings are in use (stats fuse.*), key and path namespaces' files, batched
GETs and PUTs, a waiting lookup ended by a signal (INTERRUPT still comes
through /dev/fuse and reaches a request served on a ring), readers on
every CPU at once, a stop with a waiter in a ring thread, a SIGKILL and
the restart that recovers the dead mount; fuse_uring=off and =auto where
the kernel offers none; bad values. The module parameter is put back as
it was found at the end.

Skips (77) where this kernel's fuse has no io_uring (no
/sys/module/fuse/parameters/enable_uring: kernels before 6.14, or built
without CONFIG_FUSE_IO_URING) or when not run as root.
"""
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
from test_kvfs import kvfs  # noqa: E402

pathmount.need("daemon")
BIN = pathmount.MOUNT_BIN
PARAM = "/sys/module/fuse/parameters/enable_uring"
if not os.path.exists(PARAM):
    print("skip: this kernel's fuse has no io_uring (%s)" % PARAM)
    sys.exit(77)
if os.geteuid() != 0:
    print("skip: setting %s needs root" % PARAM)
    sys.exit(77)
with open(PARAM) as _f:
    SAVED = _f.read().strip()


def set_param(v):
    with open(PARAM, "w") as f:
        f.write(v)


def stats(mnt):
    with open(os.path.join(mnt, ".kvfs", "stats")) as f:
        return json.load(f)


def possible_cpus():
    n = 0
    with open("/sys/devices/system/cpu/possible") as f:
        for part in f.read().strip().split(","):
            a, _, b = part.partition("-")
            n += int(b or a) - int(a) + 1
    return n


def key(i):
    return "%032x" % (0xabc000 + i)


class Ring(unittest.TestCase):
    """One mount with fuse_uring=on for the whole class."""

    @classmethod
    def setUpClass(cls):
        set_param("N")  # fuse_uring=on sets it itself
        cls.m = pathmount.Mount(["l1_size=64M", "fuse_uring=on"], l2=False)
        cls.mnt = cls.m.mount()

    @classmethod
    def tearDownClass(cls):
        cls.m.cleanup()
        set_param(SAVED)

    def test_rings_in_use(self):
        with open(PARAM) as f:
            self.assertIn(f.read().strip(), ("Y", "1"))
        before = stats(self.mnt)["fuse"]
        self.assertEqual(before["uring_queues"], possible_cpus())
        self.assertGreaterEqual(before["uring_entries"], possible_cpus())
        ns = os.path.join(self.mnt, "ring_a")
        os.makedirs(ns, exist_ok=True)
        for i in range(20):
            with open(os.path.join(ns, key(i)), "wb") as f:
                f.write(bytes([i]) * 70000)
        for i in range(20):
            with open(os.path.join(ns, key(i)), "rb") as f:
                self.assertEqual(f.read(), bytes([i]) * 70000)
        after = stats(self.mnt)["fuse"]
        # each file: create, write, flush, release, open, read, release
        self.assertGreaterEqual(after["uring_requests"] -
                                before["uring_requests"], 20 * 6)
        with open(os.path.join(self.mnt, ".kvfs", "config")) as f:
            self.assertIn("fuse_uring=on\n", f.read())

    def test_large_chunks_and_batches(self):
        """2 MiB chunks: READs and WRITEs of the most a request carries
        (1 MiB), batched GETs and PUTs (ioctls with 16 KiB arguments)."""
        keys = [bytes.fromhex(key(100 + i)) for i in range(8)]
        data = [os.urandom(2 << 20) for _ in keys]
        with kvfs.Connector(self.mnt, "ring_b") as c:
            c.put_many(keys, data)
            out = [bytearray(2 << 20) for _ in keys]
            self.assertEqual(c.get_many(keys, out), [2 << 20] * 8)
            self.assertEqual([bytes(o) for o in out], data)
        for k, d in zip(keys, data):
            with open(os.path.join(self.mnt, "ring_b", k.hex()), "rb") as f:
                self.assertEqual(f.read(), d)

    def test_path_namespace(self):
        """A path namespace: directories, a temporary renamed onto its
        name, a rewrite, reads by name and by path key right after the
        close (its RELEASE may be served after the GET, on another
        ring thread: the GET publishes the closed file first)."""
        root = os.path.join(self.mnt, "ring_p")
        os.makedirs(root, exist_ok=True)
        os.setxattr(root, "user.kvfs.names", b"paths")
        d = os.path.join(root, "a", "b")
        os.makedirs(d)
        with kvfs.Connector(self.mnt, "ring_p", create=False) as c:
            for i in range(30):
                tmp = os.path.join(d, ".tmp%d" % i)
                with open(tmp, "wb") as f:
                    f.write(b"v%03d" % i * 1000)
                os.replace(tmp, os.path.join(d, "blk"))
                with open(os.path.join(d, "blk"), "rb") as f:
                    self.assertEqual(f.read(), b"v%03d" % i * 1000)
                p = os.path.join(d, "new%d" % i)
                with open(p, "wb") as f:
                    f.write(b"n%02d" % i)
                out = bytearray(16)
                self.assertEqual(
                    c.get_many([kvfs.path_key("a/b/new%d" % i)], [out]), [3])
                self.assertEqual(bytes(out[:3]), b"n%02d" % i)
        self.assertEqual(sorted(os.listdir(d))[:2], ["blk", "new0"])

    def test_readers_on_every_cpu(self):
        """Threads pinned to each CPU read at once: each CPU's ring
        serves its own callers."""
        ns = os.path.join(self.mnt, "ring_c")
        os.makedirs(ns, exist_ok=True)
        for i in range(16):
            with open(os.path.join(ns, key(200 + i)), "wb") as f:
                f.write(bytes([i]) * 300000)
        errs = []

        def reader(cpu):
            try:
                os.sched_setaffinity(0, {cpu})
                for r in range(10):
                    for i in range(16):
                        with open(os.path.join(ns, key(200 + i)), "rb") as f:
                            if f.read() != bytes([i]) * 300000:
                                errs.append((cpu, i))
            except Exception as e:  # noqa: BLE001 (reported below)
                errs.append(repr(e))

        ts = [threading.Thread(target=reader, args=(c,))
              for c in sorted(os.sched_getaffinity(0)) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errs, [])

    def test_waiting_lookup_interrupted(self):
        """A waiting lookup served on a ring ends early when its caller
        gets a signal: the INTERRUPT comes through /dev/fuse and reaches
        the request on the ring, whose handler replies EINTR (the kernel
        returns from the ioctl only with the daemon's reply; the handler
        raises, so Python does not retry it)."""
        code = ("import sys, signal, time; sys.path.insert(0, %r)\n"
                "import kvfs\n"
                "class Sig(Exception): pass\n"
                "def h(*a): raise Sig()\n"
                "signal.signal(signal.SIGUSR1, h)\n"
                "c = kvfs.Connector(%r, 'ring_w')\n"
                "print('ready', flush=True)\n"
                "t0 = time.monotonic()\n"
                "try:\n"
                "    r = c.lookup([bytes(16)], wait=30)\n"
                "    print('found', r.found)\n"
                "except Sig:\n"
                "    print('interrupted %%.1f' %% (time.monotonic() - t0))\n"
                % (os.path.dirname(kvfs.__path__[0]), self.mnt))
        p = subprocess.Popen([sys.executable, "-c", code],
                             stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(p.stdout.readline().strip(), "ready")
            time.sleep(0.5)
            p.send_signal(signal.SIGUSR1)
            out = p.communicate(timeout=20)[0].split()
            self.assertEqual(out[0], "interrupted")
            self.assertLess(float(out[1]), 10)
        finally:
            p.kill()
            p.wait()


class RingBound(unittest.TestCase):
    def tearDown(self):
        set_param(SAVED)

    def test_waits_take_half_a_ring_at_most(self):
        """Waiting lookups from callers on one CPU hold at most half of
        that CPU's ring entries (the rest EAGAIN, counted in
        wait.refused; the binding retries): the CPU's other requests,
        and the PUT that ends the waits, are still served at once."""
        m = pathmount.Mount(["l1_size=16M", "fuse_uring=on", "wait_max=512",
                             "wait_max_uid=512"], l2=False)
        mnt = m.mount()
        try:
            fu = stats(mnt)["fuse"]
            online = len(os.sched_getaffinity(0))
            per_cpu = (fu["uring_entries"] - (fu["uring_queues"] - online)) \
                // online
            n = per_cpu // 2 + 3
            cpu = min(os.sched_getaffinity(0))
            done = []

            def waiter(i):
                os.sched_setaffinity(0, {cpu})
                with kvfs.Connector(mnt, "rb") as c:
                    r = c.lookup([b"\x07" * 16], wait=20)
                    done.append(r.found)

            os.makedirs(os.path.join(mnt, "rb"), exist_ok=True)
            ts = [threading.Thread(target=waiter, args=(i,))
                  for i in range(n)]
            for t in ts:
                t.start()
            time.sleep(1.5)
            refused = stats(mnt)["wait"]["refused"]
            self.assertGreater(refused, 0)
            # the CPU's other requests: served while the waits go on
            res = []

            def other():
                os.sched_setaffinity(0, {cpu})
                t0 = time.monotonic()
                p = os.path.join(mnt, "rb", key(7))
                with open(p, "wb") as f:
                    f.write(b"o" * 1000)
                with open(p, "rb") as f:
                    res.append((f.read() == b"o" * 1000,
                                time.monotonic() - t0))

            t = threading.Thread(target=other)
            t.start()
            t.join()
            self.assertTrue(res[0][0])
            self.assertLess(res[0][1], 1.0)
            # a PUT of the awaited key from that CPU gets an entry (the
            # waits hold only their share) and ends every wait
            put = []

            def putter():
                os.sched_setaffinity(0, {cpu})
                t0 = time.monotonic()
                with kvfs.Connector(mnt, "rb") as c:
                    c.put_many([b"\x07" * 16], [b"p" * 4096])
                put.append(time.monotonic() - t0)

            t = threading.Thread(target=putter)
            t.start()
            t.join()
            self.assertLess(put[0], 5.0)
            for t in ts:
                t.join()
            self.assertEqual(done, [1] * n)
        finally:
            m.cleanup()


class Lifecycle(unittest.TestCase):
    def tearDown(self):
        set_param(SAVED)

    def test_stop_with_a_waiter(self):
        """SIGTERM while a ring thread waits in a lookup: the daemon stops
        within seconds (the waiter sees the session end)."""
        m = pathmount.Mount(["l1_size=16M", "fuse_uring=on"], l2=False)
        mnt = m.mount()
        try:
            code = ("import sys; sys.path.insert(0, %r); import kvfs\n"
                    "c = kvfs.Connector(%r, 'w')\n"
                    "print('ready', flush=True)\n"
                    "try:\n"
                    "    c.lookup([bytes(16)], wait=60)\n"
                    "except OSError:\n"
                    "    pass\n" %
                    (os.path.dirname(kvfs.__path__[0]), mnt))
            p = subprocess.Popen([sys.executable, "-c", code],
                                 stdout=subprocess.PIPE, text=True)
            self.assertEqual(p.stdout.readline().strip(), "ready")
            time.sleep(0.5)
            t0 = time.monotonic()
            m.daemon.send_signal(signal.SIGTERM)
            self.assertEqual(m.daemon.wait(30), 0)
            m.daemon = None
            self.assertLess(time.monotonic() - t0, 5)
            p.communicate(timeout=30)
        finally:
            m.cleanup()

    def test_sigkill_and_restart(self):
        m = pathmount.Mount(["l1_size=16M", "fuse_uring=on"])
        mnt = m.mount()
        try:
            os.mkdir(os.path.join(mnt, "ns"))
            with open(os.path.join(mnt, "ns", key(1)), "wb") as f:
                f.write(b"x" * 8192)
            m.daemon.send_signal(signal.SIGKILL)
            m.daemon.wait(15)
            m.daemon = None
            with self.assertRaises(OSError) as cm:
                os.statvfs(mnt)
            # (ECONNABORTED, ECANCELED: caught while the kernel tears
            # the killed daemon's rings down)
            self.assertIn(cm.exception.errno,
                          (errno.ENOTCONN, errno.ECONNABORTED,
                           errno.ECANCELED))
            # kvfs-mount again (as a daemon: it returns once mounted)
            # recovers the dead mount, with the rings again
            r = subprocess.run([BIN, "-o", ",".join(m.opts), mnt],
                               stderr=subprocess.PIPE, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("dead daemon", r.stderr)
            self.assertGreater(stats(mnt)["fuse"]["uring_queues"], 0)
            with open(os.path.join(mnt, "ns", "f" * 32), "wb") as f:
                f.write(b"y" * 4096)
            with open(os.path.join(mnt, "ns", "f" * 32), "rb") as f:
                self.assertEqual(f.read(), b"y" * 4096)
            self.assertEqual(subprocess.call(["fusermount3", "-u", mnt]), 0)
        finally:
            m.cleanup()

    def test_off_and_auto(self):
        """off: /dev/fuse alone, even where the kernel offers the ring;
        auto: the ring only where the kernel offers it."""
        for param, opt, want in (("Y", "fuse_uring=off", 0),
                                 ("N", "fuse_uring=auto", 0),
                                 ("Y", "fuse_uring=auto", possible_cpus())):
            set_param(param)
            m = pathmount.Mount(["l1_size=16M", opt], l2=False)
            mnt = m.mount()
            try:
                os.mkdir(os.path.join(mnt, "ns"))
                with open(os.path.join(mnt, "ns", key(2)), "wb") as f:
                    f.write(b"z" * 100)
                with open(os.path.join(mnt, "ns", key(2)), "rb") as f:
                    self.assertEqual(f.read(), b"z" * 100)
                fu = stats(mnt)["fuse"]
                self.assertEqual(fu["uring_queues"], want, (param, opt))
                self.assertEqual(fu["uring_requests"] > 0, want > 0)
            finally:
                m.cleanup()

    def test_bad_values(self):
        for v in ("yes", "1", "", "ON"):
            r = subprocess.run([BIN, "-f", "-o", "fuse_uring=" + v, "/tmp"],
                               stderr=subprocess.PIPE, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 1, v)
            self.assertIn("fuse_uring", r.stderr, v)


if __name__ == "__main__":
    unittest.main()
