#!/usr/bin/python3
"""Path files found by name in L3 from another node (issue 28, item 4).

A real redis-server on loopback and two kvfs mounts sharing it, each with
a path namespace "pp". Node A writes pp/x/y.bin (l3_ingest=all); node B,
which never saw it, opens pp/x/y.bin by name: the lookup of "x" finds the
directory A's file implies (its marker in L3), the lookup of "y.bin" the
file, promoted from L3 and checked; lookup, stat and open agree. Also: a
name in neither tier is ENOENT on B; a file B loses locally (evicted, no
L2) is found again in L3; a key namespace is unchanged. Modes and owners
travel with the files' L3 records (record.h version 3): a file 0600 of
uid 1000 is 0600 of uid 1000 on the node that finds it in L3, and EACCES
for nobody there, also after a chmod of a file already in L3.
Versions (VersionsL3, review r10): A replaces x by an O_TRUNC rewrite and
y by a rename onto it; once L3 holds them, B's next stat and open (plain
and preloaded) give the new versions within a couple of seconds (A's
notification carries the version's raw checksum, "<key hex><ns>/<raw_sum
hex>", and B lets go of its other version); B's reader of the old version
keeps its bytes; B's own version not yet in L3 is never dropped; the same
version's notification keeps the copy; malformed messages are ignored.
"""
import ctypes
import errno
import os
import shutil
import subprocess
import struct
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402
import redisserver  # noqa: E402
sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
import kvfs  # noqa: E402

pathmount.need("daemon")
redisserver.need()

R = None
TMP = None
A = B = None
PRELOAD = os.path.join(pathmount.PLAIN, "libkvfs_preload.so")


def node_opts(ingest):
    # allow_other: another user's lookups and GETs (test_by_key_as_...)
    return ["names=paths", "l1_size=16M", "max_chunk=4M", "allow_other",
            "l3=redis://127.0.0.1:%d" % R.port, "l3_ingest=" + ingest]


def setUpModule():
    global R, TMP, A, B
    TMP = tempfile.mkdtemp(prefix="kvfs-pl3.")
    R = redisserver.Redis(TMP)
    A = pathmount.new_mount(node_opts("all"), l2=False)
    B = pathmount.new_mount(node_opts("evicted"), l2=False)


def tearDownModule():
    for m in (A, B):
        if m:
            pathmount.drop_mount(m)
    if R:
        R.kill()
    shutil.rmtree(TMP, ignore_errors=True)


put = pathmount.put


def wait_key(path_in_ns, ns="pp", s=10.0):
    """Until the file's record reached Redis."""
    key = kvfs.path_key(path_in_ns).hex()
    end = time.monotonic() + s
    while True:  # s=0: once
        if R.cli("EXISTS", "kvfs:%s:%s" % (ns, key)) == "1":
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def raw_key(path):
    """kvfs_path_key of any bytes: a directory's marker is "dir/"'s."""
    lib = kvfs.load_library()
    lib.kvfs_path_key.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.c_char_p]
    out = ctypes.create_string_buffer(16)
    assert lib.kvfs_path_key(path.encode(), len(path.encode()), out) == 0
    return out.raw.hex()


def l3_attrs(path_in_ns, ns="pp"):
    """(version, flags, mode, uid, gid) of the record header of the
    value of a file (or of a directory's marker: "dir/") in Redis
    (record.h), or None."""
    buf = R.getrange("kvfs:%s:%s" % (ns, raw_key(path_in_ns)), 0, 255)
    if len(buf) < 256:
        return None
    ver, = struct.unpack_from("<H", buf, 4)
    flags, = struct.unpack_from("<I", buf, 12)
    return (ver, flags) + struct.unpack_from("<III", buf, 220)


def publish_on_a(path_in_ns, data, mode, owner):
    """Writes pp/<path_in_ns> on A with mode and owner (set before its
    close: the record A writes at publication, l3_ingest=all, carries
    them), publishes it (a read) and waits for its record in Redis."""
    path = os.path.join(A.mnt, "pp", path_in_ns)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, data)
    os.fchown(fd, owner, owner)
    os.close(fd)
    with open(path, "rb") as f:
        f.read()
    return wait_key(path_in_ns)


def as_nobody_errno(path):
    """open(path) as nobody: 0 or its errno."""
    r = pathmount.run_as(
        "import os\n"
        "try:\n"
        "    open(%r, 'rb').close()\n"
        "    print(0)\n"
        "except OSError as e:\n"
        "    print(e.errno)\n" % path)
    if r.returncode:
        raise AssertionError("nobody's python: %s" % r.stderr)
    return int(r.stdout)


class ModesL3(unittest.TestCase):
    """A file 0600 of uid 1000 stays so through L3 (before: 0644 of the
    namespace's owner, readable by nobody on the node that found it)."""

    OWNER = 1000

    @classmethod
    def setUpClass(cls):
        why = pathmount.run_as_skip_reason()
        if why:
            raise unittest.SkipTest(why)
        for m in (A, B):
            os.makedirs(os.path.join(m.mnt, "pp"), exist_ok=True)

    def private(self, path, when):
        st = os.stat(path)
        self.assertEqual((oct(st.st_mode), st.st_uid, st.st_gid),
                         (oct(0o100600), self.OWNER, self.OWNER), when)
        self.assertEqual(as_nobody_errno(path), errno.EACCES, when)

    def test_another_node(self):
        os.makedirs(os.path.join(A.mnt, "pp/md"))
        data = os.urandom(50000)
        self.assertTrue(publish_on_a("md/s.bin", data, 0o600, self.OWNER))
        time.sleep(0.3)  # the directory marker, queued after
        pb = os.path.join(B.mnt, "pp/md/s.bin")
        self.private(pb, "found in L3 by another node")
        # record.h version 3, KVREC_F_ATTR, mode, uid, gid
        self.assertEqual(l3_attrs("md/s.bin"),
                         (3, 2, 0o600, self.OWNER, self.OWNER))
        with open(pb, "rb") as f:
            self.assertEqual(f.read(), data)
        # a GET by path key, of a file B has no name for: judged by the
        # record's mode too (EACCES for nobody, root reads it)
        self.assertTrue(publish_on_a("md/k.bin", b"k" * 3000, 0o600,
                                     self.OWNER))
        r = pathmount.run_as(
            "import kvfs\n"
            "c = kvfs.Connector(%r, 'pp', create=False)\n"
            "k = kvfs.path_key('md/k.bin')\n"
            "r = c.get_many([k], [bytearray(4096)])[0]\n"
            "print(r.errno if isinstance(r, OSError) else r)\n" % B.mnt)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), str(errno.EACCES))
        with kvfs.Connector(B.mnt, "pp", create=False) as c:
            b = bytearray(4096)
            self.assertEqual(c.get_many([kvfs.path_key("md/k.bin")], [b]),
                             [3000])
        # a chmod on A of a file L3 holds: A writes its record again
        os.makedirs(os.path.join(A.mnt, "pp/mc"))
        self.assertTrue(publish_on_a("mc/r.bin", b"r" * 7000, 0o644, 0))
        os.chown(os.path.join(A.mnt, "pp/mc/r.bin"), self.OWNER,
                 self.OWNER)
        os.chmod(os.path.join(A.mnt, "pp/mc/r.bin"), 0o600)
        end = time.monotonic() + 10
        while l3_attrs("mc/r.bin")[2:5] != (0o600, self.OWNER, self.OWNER) \
                and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.3)
        self.private(os.path.join(B.mnt, "pp/mc/r.bin"),
                     "chmod'ed on A after it reached L3")

    def test_directory_modes(self):
        """A directory's L3 marker carries its mode and owner: another
        node makes it 0700 of uid 1000 (nobody cannot reach the 0644
        file below), also after a chmod of a directory already marked."""
        for d, early in (("mp", True), ("mq", False)):
            top = os.path.join(A.mnt, "pp", d)
            os.mkdir(top)
            if early:  # before its marker is written
                os.chown(top, self.OWNER, self.OWNER)
                os.chmod(top, 0o700)
            self.assertTrue(publish_on_a(d + "/f.bin", b"f" * 4000, 0o644,
                                         self.OWNER))
            if not early:  # marked 0755: marked again
                time.sleep(0.3)
                os.chown(top, self.OWNER, self.OWNER)
                os.chmod(top, 0o700)
            end = time.monotonic() + 10
            while (l3_attrs(d + "/") or (0,) * 5)[2:] != \
                    (0o700, self.OWNER, self.OWNER) and \
                    time.monotonic() < end:
                time.sleep(0.05)
            self.assertEqual(l3_attrs(d + "/"),
                             (3, 2, 0o700, self.OWNER, self.OWNER), d)
            st = os.stat(os.path.join(B.mnt, "pp", d))
            self.assertEqual((oct(st.st_mode), st.st_uid, st.st_gid),
                             (oct(0o40700), self.OWNER, self.OWNER), d)
            self.assertEqual(as_nobody_errno(
                os.path.join(B.mnt, "pp", d, "f.bin")), errno.EACCES, d)
            with open(os.path.join(B.mnt, "pp", d, "f.bin"), "rb") as f:
                self.assertEqual(f.read(), b"f" * 4000)

    def test_evicted_from_this_node(self):
        # B's own file (ingest=evicted, no L2): chmod'ed once published,
        # then pushed out of B's L1 into L3; found again by name
        os.makedirs(os.path.join(B.mnt, "pp/me"))
        pb = os.path.join(B.mnt, "pp/me/p.bin")
        put(pb, b"p" * 90000)
        with open(pb, "rb") as f:
            f.read()
        os.chown(pb, self.OWNER, self.OWNER)
        os.chmod(pb, 0o600)
        for i in range(12):  # 12 x 2 MiB through a 16 MiB L1
            put(os.path.join(B.mnt, "pp/me/fill%d" % i),
                os.urandom(2 << 20))
        self.assertTrue(wait_key("me/p.bin"))
        time.sleep(0.5)
        self.assertEqual(pathmount.tier_of(pb), "l1")  # promoted again
        self.private(pb, "evicted to L3 and found again")
        with open(pb, "rb") as f:
            self.assertEqual(f.read(), b"p" * 90000)

    def test_chmod_when_only_l2_holds_it(self):
        """A node with L2 and L3 (l3_ingest=all): its file reached L3,
        then left L1 for L2; a chmod cannot write the record again from
        L1, so it deletes it from L3: another node misses it instead of
        finding the old mode."""
        c = pathmount.new_mount(node_opts("all") + ["l2_size=128M",
                                                    "ingest=evicted"])
        try:
            os.makedirs(os.path.join(c.mnt, "pp/ml"))
            pc = os.path.join(c.mnt, "pp/ml/q.bin")
            put(pc, b"q" * 20000)
            with open(pc, "rb") as f:
                f.read()
            self.assertTrue(wait_key("ml/q.bin"))
            for i in range(12):  # out of C's L1, into its L2
                put(os.path.join(c.mnt, "pp/ml/fill%d" % i),
                    os.urandom(2 << 20))
            self.assertEqual(pathmount.tier_of(pc), "l2")
            os.chown(pc, self.OWNER, self.OWNER)
            os.chmod(pc, 0o600)
            end = time.monotonic() + 10
            while wait_key("ml/q.bin", s=0) and time.monotonic() < end:
                time.sleep(0.05)
            self.assertFalse(wait_key("ml/q.bin", s=0), "still in L3")
            time.sleep(0.3)
            with self.assertRaises(FileNotFoundError):
                os.stat(os.path.join(B.mnt, "pp/ml/q.bin"))
            self.private(pc, "on the node that holds it in L2")
            with open(pc, "rb") as f:
                self.assertEqual(f.read(), b"q" * 20000)
        finally:
            pathmount.drop_mount(c)


class PathsL3(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for m in (A, B):  # ModesL3 may have made it
            os.makedirs(os.path.join(m.mnt, "pp"), exist_ok=True)

    def test_read_by_name_on_another_node(self):
        data = os.urandom(300000)
        os.makedirs(os.path.join(A.mnt, "pp/x/z"))
        put(os.path.join(A.mnt, "pp/x/y.bin"), data)
        put(os.path.join(A.mnt, "pp/x/z/w.bin"), b"w" * 5000)
        with open(os.path.join(A.mnt, "pp/x/y.bin"), "rb") as f:
            self.assertEqual(f.read(), data)  # published
        with open(os.path.join(A.mnt, "pp/x/z/w.bin"), "rb") as f:
            f.read()
        self.assertTrue(wait_key("x/y.bin"), "A's file never reached L3")
        self.assertTrue(wait_key("x/z/w.bin"))
        time.sleep(0.3)  # the directory markers, queued before
        pb = os.path.join(B.mnt, "pp/x/y.bin")
        st = os.stat(pb)  # lookup of x, then of y.bin
        self.assertEqual(st.st_size, len(data))
        with open(pb, "rb") as f:  # open agrees with lookup
            self.assertEqual(f.read(), data)
        self.assertEqual(os.stat(pb).st_ino, st.st_ino)
        self.assertTrue(os.path.isdir(os.path.join(B.mnt, "pp/x")))
        # a deeper path, straight away
        with open(os.path.join(B.mnt, "pp/x/z/w.bin"), "rb") as f:
            self.assertEqual(f.read(), b"w" * 5000)
        # found names are listed from then on
        self.assertIn("y.bin", os.listdir(os.path.join(B.mnt, "pp/x")))
        # a name in neither tier is a miss, a file is not a directory
        for p in ("pp/x/nope.bin", "pp/nodir", "pp/x/y.bin/sub"):
            with self.assertRaises(OSError) as cm:
                os.stat(os.path.join(B.mnt, p))
            self.assertIn(cm.exception.errno, (errno.ENOENT, errno.ENOTDIR),
                          p)
        self.assertFalse(os.path.exists(os.path.join(B.mnt, "pp/x/nope")))

    def test_by_key_as_another_user(self):
        """A file another node stored, that this node has no name for
        yet: another user's lookup and GET by its path key find it in L3
        (judged as its name would be here: 0755 directories, a 0644
        file), as root's do."""
        why = pathmount.run_as_skip_reason()
        if why:
            self.skipTest(why)
        os.makedirs(os.path.join(A.mnt, "pp/k"))
        put(os.path.join(A.mnt, "pp/k/v.bin"), b"v" * 3000)
        with open(os.path.join(A.mnt, "pp/k/v.bin"), "rb") as f:
            f.read()
        self.assertTrue(wait_key("k/v.bin"))
        r = pathmount.run_as(
            "import kvfs\n"
            "c = kvfs.Connector(%r, 'pp', create=False)\n"
            "k = kvfs.path_key('k/v.bin')\n"
            "b = bytearray(4096)\n"
            "print(c.lookup([k]).found, c.get_many([k], [b]), "
            "bytes(b[:3]))\n" % B.mnt)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "1 [3000] b'vvv'")

    def test_lost_locally_found_again(self):
        os.makedirs(os.path.join(B.mnt, "pp/lost"))
        # B's own file (ingest=evicted): evicted from B's L1 into L3
        put(os.path.join(B.mnt, "pp/lost/f.bin"), b"f" * 100000)
        with open(os.path.join(B.mnt, "pp/lost/f.bin"), "rb") as f:
            f.read()
        for i in range(12):  # 12 x 2 MiB through a 16 MiB L1
            put(os.path.join(B.mnt, "pp/lost/fill%d" % i),
                os.urandom(2 << 20))
        self.assertTrue(wait_key("lost/f.bin"))
        time.sleep(0.5)
        with open(os.path.join(B.mnt, "pp/lost/f.bin"), "rb") as f:
            self.assertEqual(f.read(), b"f" * 100000)


def l3_header(path_in_ns):
    """The 256-byte record header of the file's value in Redis, or b""."""
    return R.getrange("kvfs:pp:" + kvfs.path_key(path_in_ns).hex(), 0, 255)


def l3_raw_len(path_in_ns):
    h = l3_header(path_in_ns)
    return int.from_bytes(h[24:32], "little") if len(h) == 256 else None


def l3_raw_sum(path_in_ns):
    h = l3_header(path_in_ns)
    return int.from_bytes(h[40:48], "little") if len(h) == 256 else None


def until(cond, s=10.0):
    end = time.monotonic() + s
    while not cond():
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return e


def read_preloaded(path):
    r = subprocess.run(["cat", path], capture_output=True, timeout=30,
                       env=dict(os.environ, LD_PRELOAD=PRELOAD))
    return r.stdout if r.returncode == 0 else r.stderr


def wait_stat(m, key):
    return pathmount.stats(m.mnt)["wait"].get(key, 0)  # 0: older daemon


def publish(msg):
    """A notification as a node sends it (standalone: "kvfs:handoff")."""
    return R.cli("PUBLISH", "kvfs:handoff", msg)


class VersionsL3(unittest.TestCase):
    """A new version of a path file (O_TRUNC, a rename onto it) that
    another node stored in L3 replaces this node's copy (review r10:
    before, node B served the old one forever)."""

    @classmethod
    def setUpClass(cls):
        for m in (A, B):
            os.makedirs(os.path.join(m.mnt, "pp/v"), exist_ok=True)

    def test_rewrite_and_rename_reach_another_node(self):
        v1, v2, v3 = (os.urandom(300000), os.urandom(250000),
                      os.urandom(200000))
        for n in ("x", "y"):
            pathmount.put(os.path.join(A.mnt, "pp/v", n), v1)
        self.assertTrue(until(lambda: l3_raw_len("v/x") == len(v1) and
                              l3_raw_len("v/y") == len(v1)))
        bx, by = (os.path.join(B.mnt, "pp/v", n) for n in ("x", "y"))
        self.assertEqual(read(bx), v1)
        self.assertEqual(read(by), v1)
        if os.path.exists(PRELOAD):
            self.assertEqual(read_preloaded(bx), v1)
        a_drops = wait_stat(A, "notify_superseded")
        b_drops = wait_stat(B, "notify_superseded")
        old = open(bx, "rb")  # a reader of v1 on B
        try:
            self.assertEqual(old.read(4096), v1[:4096])
            # A: x by O_TRUNC, y by a rename onto it
            # x's mode on A, which its next version keeps (and carries
            # in its L3 record)
            os.chmod(os.path.join(A.mnt, "pp/v/x"), 0o640)
            fd = os.open(os.path.join(A.mnt, "pp/v/x"),
                         os.O_WRONLY | os.O_TRUNC)
            os.write(fd, v2)
            os.close(fd)
            pathmount.put(os.path.join(A.mnt, "pp/v/.y.tmp"), v3)
            os.rename(os.path.join(A.mnt, "pp/v/.y.tmp"),
                      os.path.join(A.mnt, "pp/v/y"))
            self.assertTrue(until(lambda: l3_raw_len("v/x") == len(v2) and
                                  l3_raw_len("v/y") == len(v3)),
                            "A's new versions never reached L3")
            t0 = time.monotonic()
            # B: a fresh stat and open give the new versions (before:
            # v1 and its size, also after 61 s)
            self.assertTrue(until(lambda: read(bx) == v2 and
                                  read(by) == v3, s=2.0),
                            "B still serves x: %s, y: %s" % (
                                "v1" if read(bx) == v1 else "?",
                                "v1" if read(by) == v1 else "?"))
            took = time.monotonic() - t0
            self.assertEqual(os.stat(bx).st_size, len(v2))
            self.assertEqual(os.stat(by).st_size, len(v3))
            self.assertEqual(oct(os.stat(bx).st_mode), oct(0o100640))
            if os.path.exists(PRELOAD):
                self.assertEqual(read_preloaded(bx), v2)
                self.assertEqual(read_preloaded(by), v3)
            # the reader that had v1 open keeps v1's bytes
            self.assertEqual(old.read(), v1[4096:])
        finally:
            old.close()
        self.assertGreaterEqual(wait_stat(B, "notify_superseded"),
                                b_drops + 2)
        # A's own announcements never dropped its own copies
        self.assertEqual(wait_stat(A, "notify_superseded"), a_drops)
        self.assertEqual(read(os.path.join(A.mnt, "pp/v/x")), v2)
        self.assertLess(took, 2.0)

    def test_own_unstored_version_kept(self):
        """B's rewrite that is not in L3 (l3_ingest=evicted: sent only
        when it leaves L1) is never dropped by A's announcement of an
        older write."""
        v1, v4, v2 = b"1" * 5000, b"4" * 6000, b"2" * 7000
        pathmount.put(os.path.join(A.mnt, "pp/v/u"), v1)
        self.assertTrue(until(lambda: l3_raw_len("v/u") == len(v1)))
        bu = os.path.join(B.mnt, "pp/v/u")
        self.assertEqual(read(bu), v1)  # B's copy came from L3
        pathmount.put(bu, v4)  # B's new version: local only
        self.assertEqual(read(bu), v4)
        # B's rewrite deleted its old version from L3 (as an unlink)
        self.assertTrue(until(lambda: l3_raw_len("v/u") is None))
        got = wait_stat(B, "notify_received")
        fd = os.open(os.path.join(A.mnt, "pp/v/u"), os.O_WRONLY | os.O_TRUNC)
        os.write(fd, v2)
        os.close(fd)
        self.assertTrue(until(lambda: l3_raw_len("v/u") == len(v2)))
        self.assertTrue(until(lambda: wait_stat(B, "notify_received") > got))
        time.sleep(0.2)
        self.assertEqual(read(bu), v4)
        self.assertEqual(pathmount.tier_of(bu), "l1")

    def test_l2_copy_and_restart(self):
        """A node with L2 (ingest=all) lets go of both its copies: a
        restart does not bring the old one back from L2."""
        c = pathmount.new_mount(node_opts("all") + ["l2_size=64M",
                                                    "ingest=all"])
        try:
            v1, v2 = os.urandom(100000), os.urandom(90000)
            pathmount.put(os.path.join(A.mnt, "pp/v/w"), v1)
            self.assertTrue(until(lambda: l3_raw_len("v/w") == len(v1)))
            os.makedirs(os.path.join(c.mnt, "pp/v"), exist_ok=True)
            pc = os.path.join(c.mnt, "pp/v/w")
            self.assertEqual(read(pc), v1)
            self.assertTrue(until(lambda: pathmount.stats(c.mnt)["l2"]
                                  ["chunks"] >= 1))
            fd = os.open(os.path.join(A.mnt, "pp/v/w"),
                         os.O_WRONLY | os.O_TRUNC)
            os.write(fd, v2)
            os.close(fd)
            # let go of (not read again before the restart: only L3
            # holds v2; C's L2 must not hold v1 any more)
            self.assertTrue(until(lambda: wait_stat(c, "notify_superseded")
                                  == 1, s=2.0))
            time.sleep(0.3)  # the journal's sync
            c.remount()
            # never v1; a miss today: the journal names the file and L2
            # lacks it, so this mount refuses its key from L3 (kvfs(7),
            # l3.tombstones), as for a file evicted from L2
            got = read(pc)
            self.assertNotEqual(got, v1)
            self.assertTrue(got == v2 or isinstance(got, FileNotFoundError),
                            repr(got)[:80])
        finally:
            pathmount.drop_mount(c)

    def test_same_version_and_malformed_kept(self):
        """An announcement of the version B holds keeps it; messages
        that do not parse are ignored."""
        v = os.urandom(40000)
        pathmount.put(os.path.join(A.mnt, "pp/v/s"), v)
        self.assertTrue(until(lambda: l3_raw_len("v/s") == len(v)))
        bs = os.path.join(B.mnt, "pp/v/s")
        self.assertEqual(read(bs), v)
        key = kvfs.path_key("v/s").hex()
        drops = wait_stat(B, "notify_superseded")
        hits = pathmount.stats(B.mnt)["l3"]["hits"]
        for bad in (key + "pp/", key + "pp/12", key + "pp/" + "g" * 16,
                    key + "/" + "0" * 16, key + "pp/" + "0" * 17,
                    key + "pp/" + "A" * 16):
            publish(bad)
        publish("%spp/%016x" % (key, l3_raw_sum("v/s")))  # the same
        # then another version's (one channel: delivered in order): B
        # lets go of its copy once, and finds L3's again
        publish("%spp/%016x" % (key, l3_raw_sum("v/s") ^ 1))
        self.assertTrue(until(lambda: wait_stat(B, "notify_superseded") >
                              drops))
        time.sleep(0.2)
        self.assertEqual(wait_stat(B, "notify_superseded"), drops + 1)
        self.assertEqual(pathmount.stats(B.mnt)["l3"]["hits"], hits)
        self.assertEqual(read(bs), v)
        self.assertEqual(pathmount.stats(B.mnt)["l3"]["hits"], hits + 1)


if __name__ == "__main__":
    unittest.main()
