#!/usr/bin/python3
"""Path namespaces under the tools people use on any directory (issue 28).

rsync -a, rsync -rt, cp -a, cp -r, mv and tar, run for real, into and out
of a path namespace of a real mount: each must exit 0 with every byte in
place (compared file by file) and print nothing on stderr. Also: st_ino
stays the same across publication; an open file whose name was replaced
or unlinked keeps its attributes (every call on its fd); chmod and
chown of path files; xattrs on path files and directories as kvfs(7)
says; a writable MAP_SHARED mapping is ENODEV, as documented.

KVFS_TOOLS_TABLE=1 prints the table tool / exit code / bytes compared.
"""
import errno
import mmap
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

pathmount.need("daemon")

M = None
LOCAL = None
TABLE = []
PUBLISH_S = 0.8  # a closed file is published 200-450 ms after its last close
# a minimal access ACL (user::rw-, group::r--, other::r--), as cp -a sets
ACL = bytes.fromhex("02000000" "01000600ffffffff" "04000400ffffffff"
                    "20000400ffffffff")  # a closed file is published 200 ms after its last close


def setUpModule():
    global M, LOCAL
    M = pathmount.new_mount(["names=paths", "l1_size=64M", "max_chunk=4M",
                             "tmp_timeout=2"], l2=False)
    LOCAL = tempfile.mkdtemp(prefix="kvfs-tools.",
                             dir=os.environ.get("KVFS_L2_TMP", "/var/tmp"))


def tearDownModule():
    pathmount.drop_mount(M)
    shutil.rmtree(LOCAL, ignore_errors=True)
    if os.environ.get("KVFS_TOOLS_TABLE") == "1":
        print("\n%-32s %4s %8s %s" % ("tool", "exit", "bytes", "notes"),
              file=sys.stderr)
        for row in TABLE:
            print("%-32s %4d %8d %s" % row, file=sys.stderr)
        TABLE.clear()


put = pathmount.put


def make_tree(root):
    """A small tree as engines' disk tiers and operators have: nested
    directories, empty and odd-sized files, a few modes and old mtimes."""
    files = {
        "a.bin": os.urandom(300000),
        "empty": b"",
        "one": b"1",
        "d1/b.bin": os.urandom(4097),
        "d1/d2/c.bin": os.urandom(1 << 20),
        "d1/d2/d3/deep.txt": b"deep\n" * 1000,
        "d4/x.sh": b"#!/bin/sh\necho hi\n",
    }
    for rel, data in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        put(p, data)
    os.chmod(os.path.join(root, "d4/x.sh"), 0o755)
    os.chmod(os.path.join(root, "one"), 0o600)
    os.makedirs(os.path.join(root, "emptydir"))
    for rel in files:
        os.utime(os.path.join(root, rel), (1600000000, 1600000000))
    return files


def compare(test, files, root, modes=True, mtimes=False):
    """Every file of files under root, byte for byte: the bytes compared."""
    n = 0
    for rel, data in files.items():
        p = os.path.join(root, rel)
        with open(p, "rb") as f:
            got = f.read()
        test.assertEqual(got, data, "bytes differ: %s" % rel)
        n += len(got)
        if modes and rel in ("d4/x.sh", "one"):
            test.assertEqual(stat.S_IMODE(os.stat(p).st_mode),
                             0o755 if rel == "d4/x.sh" else 0o600,
                             "mode lost: %s" % rel)
        if mtimes:
            test.assertEqual(int(os.stat(p).st_mtime), 1600000000,
                             "mtime lost: %s" % rel)
    if "d1/d2/c.bin" in files:
        test.assertTrue(os.path.isdir(os.path.join(root, "d1/d2/d3")))
        test.assertTrue(os.path.isdir(os.path.join(root, "emptydir")))
    return n


class Tools(unittest.TestCase):
    """Each tool into a path namespace, then out of it again."""

    @classmethod
    def setUpClass(cls):
        cls.ns = os.path.join(M.mnt, "tools")
        os.mkdir(cls.ns)

    def setUp(self):
        self.errs = []

    def tearDown(self):
        # every tool of a test ran (for the table); then its failures
        self.assertEqual(self.errs, [])

    def run_tool(self, name, argv, files, dst, **kw):
        """Runs a tool, then compares: bytes first (the table's count),
        then modes and mtimes as asked. Failures are kept for tearDown,
        so the tools after a failing one still run."""
        r = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, shell=isinstance(argv, str))
        err = r.stderr.decode(errors="replace")
        n, note = -1, ""
        try:
            n = compare(self, files, dst, modes=False)
            compare(self, files, dst, **kw)
        except (AssertionError, OSError) as e:
            note = "; %s" % str(e).split(" : ")[-1][-40:]
        if isinstance(argv, list) and argv[0] in ("cp", "mv") and \
                not dst.startswith(M.mnt) and os.path.exists(dst):
            # kvfs's computed attributes were not copied out
            for f in files:
                if os.listxattr(os.path.join(dst, f)):
                    note += "; user.kvfs.* copied out"
                    break
        TABLE.append((name, r.returncode, n, "%d lines on stderr%s" % (
            err.count("\n"), note)))
        if r.returncode or err or note:
            self.errs.append("%s: exit %d%s: %s" % (name, r.returncode,
                                                    note, err[:300]))
        return n

    def src(self, name):
        s = os.path.join(LOCAL, name)
        return s, make_tree(s)

    def test_rsync_a(self):
        s, files = self.src("rsync-a")
        dst = os.path.join(self.ns, "rsync-a")
        self.run_tool("rsync -a (in)", ["rsync", "-a", s + "/", dst + "/"],
                      files, dst, mtimes=True)
        # again: nothing changed, nothing to do
        self.run_tool("rsync -a (in, again)",
                      ["rsync", "-a", s + "/", dst + "/"], files, dst)
        out = os.path.join(LOCAL, "rsync-a.out")
        self.run_tool("rsync -a (out)", ["rsync", "-a", dst + "/",
                                         out + "/"], files, out, mtimes=True)

    def test_rsync_rt(self):
        s, files = self.src("rsync-rt")
        dst = os.path.join(self.ns, "rsync-rt")
        self.run_tool("rsync -rt (in)", ["rsync", "-rt", s + "/", dst + "/"],
                      files, dst, modes=False, mtimes=True)
        out = os.path.join(LOCAL, "rsync-rt.out")
        self.run_tool("rsync -rt (out)", ["rsync", "-rt", dst + "/",
                                          out + "/"], files, out,
                      modes=False, mtimes=True)

    def test_cp_a(self):
        s, files = self.src("cp-a")
        self.run_tool("cp -a (in)", ["cp", "-a", s, self.ns + "/"], files,
                      os.path.join(self.ns, "cp-a"), mtimes=True)
        out = os.path.join(LOCAL, "cp-a.out")
        self.run_tool("cp -a (out)", ["cp", "-a", os.path.join(
            self.ns, "cp-a"), out], files, out, mtimes=True)

    def test_cp_r_just_written(self):
        # files just written (not yet published): cp -r must not find
        # them "replaced while being copied" (their st_ino moved)
        d = os.path.join(self.ns, "cpr")
        os.makedirs(os.path.join(d, "sub"))
        files = {"f%d" % i: os.urandom(1000 + i) for i in range(20)}
        files.update({"sub/g%d" % i: os.urandom(77 * i) for i in range(5)})
        for rel, data in files.items():
            put(os.path.join(d, rel), data)
        self.run_tool("cp -r (within, just written)",
                      ["cp", "-r", d, os.path.join(self.ns, "cpr2")], files,
                      os.path.join(self.ns, "cpr2"), modes=False)

    def test_mv(self):
        s, files = self.src("mv")
        self.run_tool("mv (in)", ["mv", s, self.ns + "/"], files,
                      os.path.join(self.ns, "mv"), mtimes=True)
        # between directories of the namespace (EXDEV: mv copies)
        os.mkdir(os.path.join(self.ns, "mvdir"))
        self.run_tool("mv (between directories)",
                      ["mv", os.path.join(self.ns, "mv"),
                       os.path.join(self.ns, "mvdir/")], files,
                      os.path.join(self.ns, "mvdir/mv"), mtimes=True)
        self.assertFalse(os.path.exists(os.path.join(self.ns, "mv")))
        out = os.path.join(LOCAL, "mv.out")
        self.run_tool("mv (out)", ["mv", os.path.join(self.ns, "mvdir/mv"),
                                   out], files, out, mtimes=True)

    def test_mv_just_written(self):
        d = os.path.join(self.ns, "mvnew")
        os.makedirs(os.path.join(d, "sub"))
        files = {"f%d" % i: os.urandom(500 + i) for i in range(10)}
        files["sub/g"] = b"g" * 1234
        for rel, data in files.items():
            put(os.path.join(d, rel), data)
        os.mkdir(os.path.join(self.ns, "mvnew-into"))
        self.run_tool("mv (just written, between dirs)",
                      ["mv", d, os.path.join(self.ns, "mvnew-into/")], files,
                      os.path.join(self.ns, "mvnew-into/mvnew"), modes=False)

    def test_tar(self):
        s, files = self.src("tar")
        dst = os.path.join(self.ns, "tar")
        os.mkdir(dst)
        self.run_tool("tar x (in)", "tar -C %s -cf - . | tar -C %s -xf -" % (
            s, dst), files, dst, mtimes=True)
        out = os.path.join(LOCAL, "tar.out")
        os.mkdir(out)
        self.run_tool("tar c (out)", "tar -C %s -cf - . | tar -C %s -xf -" % (
            dst, out), files, out, mtimes=True)


class Inodes(unittest.TestCase):
    """st_ino is the file's for its whole life (issue 28, item 1)."""

    def test_ino_stable_across_publication(self):
        ns = os.path.join(M.mnt, "ino")
        os.mkdir(ns)
        p = os.path.join(ns, "f")
        put(p, b"hi\n")
        before = os.stat(p).st_ino
        with open(p, "rb") as f:  # an open publishes it
            self.assertEqual(os.fstat(f.fileno()).st_ino, before)
        self.assertEqual(os.stat(p).st_ino, before)
        q = os.path.join(ns, "g")
        put(q, b"g")
        gino = os.stat(q).st_ino
        self.assertNotEqual(gino, before)
        time.sleep(PUBLISH_S)  # published by the background thread
        self.assertEqual(os.stat(q).st_ino, gino)
        # readdir's d_ino agrees with stat
        with os.scandir(ns) as it:
            for e in it:
                self.assertEqual(e.inode(), os.stat(e.path).st_ino, e.name)
        # a new version by O_TRUNC is the same file
        put(q, b"g2")
        self.assertEqual(os.stat(q).st_ino, gino)
        time.sleep(PUBLISH_S)
        self.assertEqual(os.stat(q).st_ino, gino)
        # a rename moves the file (and its number) to the new name
        os.rename(q, os.path.join(ns, "h"))
        self.assertEqual(os.stat(os.path.join(ns, "h")).st_ino, gino)


class OpenFiles(unittest.TestCase):
    """An open file whose name went keeps its attributes (item 3)."""

    def check_fd(self, fd, size, data):
        st = os.fstat(fd)
        self.assertEqual(st.st_size, size)
        self.assertEqual(st.st_nlink, 0)
        self.assertEqual(os.pread(fd, size + 10, 0), data)
        self.assertIn(os.getxattr(fd, "user.kvfs.tier"), (b"l1", b"l2"))
        self.assertEqual(os.listxattr(fd), [])
        os.chmod(fd, stat.S_IMODE(st.st_mode))  # no change: fine
        os.chmod(fd, 0o600)
        self.assertEqual(stat.S_IMODE(os.fstat(fd).st_mode), 0o600)
        os.utime(fd, (1700000000, 1700000000))
        self.assertEqual(int(os.fstat(fd).st_mtime), 1700000000)
        os.fsync(fd)
        self.assertEqual(os.lseek(fd, 0, os.SEEK_END), size)

    def test_replaced_and_unlinked(self):
        ns = os.path.join(M.mnt, "openfiles")
        os.mkdir(ns)
        p = os.path.join(ns, "f")
        old = b"A" * 5000
        put(p, old)
        fd = os.open(p, os.O_RDONLY)
        try:
            put(os.path.join(ns, "f.tmp"), b"B" * 10)
            os.replace(os.path.join(ns, "f.tmp"), p)
            self.assertEqual(os.stat(p).st_size, 10)
            self.check_fd(fd, 5000, old)
        finally:
            os.close(fd)
        # unlinked
        fd = os.open(p, os.O_RDONLY)
        try:
            os.unlink(p)
            self.check_fd(fd, 10, b"B" * 10)
        finally:
            os.close(fd)
        # a new version by O_TRUNC, published meanwhile
        put(p, b"C" * 300)
        fd = os.open(p, os.O_RDONLY)
        try:
            put(p, b"D" * 7)
            time.sleep(PUBLISH_S)
            self.assertEqual(os.stat(p).st_size, 7)
            self.assertEqual(os.pread(fd, 400, 0), b"C" * 300)
            self.assertEqual(os.fstat(fd).st_size, 300)
            self.assertIn(os.getxattr(fd, "user.kvfs.tier"), (b"l1", b"l2"))
        finally:
            os.close(fd)
        with open(p, "rb") as f:
            self.assertEqual(f.read(), b"D" * 7)


    def test_writer_fd_whose_name_went(self):
        # an fd still writing a file whose name was replaced or unlinked
        ns = os.path.join(M.mnt, "openwriters")
        os.mkdir(ns)
        for how in ("replace", "unlink"):
            p = os.path.join(ns, "w-" + how)
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, b"W" * 3000)
                if how == "replace":
                    put(os.path.join(ns, "w.tmp"), b"new")
                    os.replace(os.path.join(ns, "w.tmp"), p)
                    self.assertEqual(os.stat(p).st_size, 3)
                else:
                    os.unlink(p)
                st = os.fstat(fd)
                self.assertEqual((st.st_size, st.st_nlink), (3000, 0), how)
                self.assertEqual(os.pread(fd, 10, 0), b"W" * 10)
                self.assertEqual(os.listxattr(fd), [])
                os.chmod(fd, 0o640)
                self.assertEqual(stat.S_IMODE(os.fstat(fd).st_mode), 0o640)
                os.write(fd, b"more")
                os.fsync(fd)
            finally:
                os.close(fd)
            if how == "unlink":
                self.assertFalse(os.path.exists(p))
            else:
                with open(p, "rb") as f:
                    self.assertEqual(f.read(), b"new")


class Attributes(unittest.TestCase):
    """chmod, chown and xattrs of path files and directories (item 2)."""

    def test_chmod_chown(self):
        ns = os.path.join(M.mnt, "attrs")
        os.mkdir(ns)
        p = os.path.join(ns, "f")
        put(p, b"x", 0o600)
        os.chmod(p, 0o600)  # closed, maybe published: no change
        time.sleep(PUBLISH_S)
        self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o600)
        os.chmod(p, 0o600)
        os.chmod(p, 0o640)
        self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o640)
        st = os.stat(p)
        os.chown(p, st.st_uid, st.st_gid)  # no change
        os.chown(p, 1234, 5678)  # root may give a file away
        st = os.stat(p)
        self.assertEqual((st.st_uid, st.st_gid), (1234, 5678))
        # the bytes never change in place
        with self.assertRaises(OSError) as cm:
            os.truncate(p, 0)
        self.assertEqual(cm.exception.errno, errno.EPERM)
        with open(p, "rb") as f:
            self.assertEqual(f.read(), b"x")

    def test_xattrs(self):
        ns = os.path.join(M.mnt, "xattrs")
        os.makedirs(os.path.join(ns, "d"))
        p = os.path.join(ns, "f")
        put(p, b"x")
        for target in (p, os.path.join(ns, "d")):
            for name, val in (("system.posix_acl_access", ACL),
                              ("user.foo", b"v"), ("trusted.x", b"v"),
                              ("security.x", b"v")):
                with self.assertRaises(OSError) as cm:
                    os.setxattr(target, name, val)
                self.assertEqual(cm.exception.errno, errno.EOPNOTSUPP,
                                 "%s on %s" % (name, target))
            self.assertEqual(os.listxattr(target), [])
        time.sleep(PUBLISH_S)
        # the computed ones: not listed, still there by name
        self.assertEqual(os.listxattr(p), [])
        self.assertIn(os.getxattr(p, "user.kvfs.tier"), (b"l1", b"l2"))
        with self.assertRaises(OSError) as cm:
            os.setxattr(p, "user.kvfs.tier", b"l2")
        self.assertEqual(cm.exception.errno, errno.EPERM)
        os.setxattr(p, "user.kvfs.pin", b"1")
        self.assertEqual(os.getxattr(p, "user.kvfs.pin"), b"1")

    def test_shared_writable_mmap_is_enodev(self):
        ns = os.path.join(M.mnt, "mmap")
        os.mkdir(ns)
        p = os.path.join(ns, "f")
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"x" * 8192)
            with self.assertRaises(OSError) as cm:
                mmap.mmap(fd, 8192, mmap.MAP_SHARED,
                          mmap.PROT_READ | mmap.PROT_WRITE)
            self.assertEqual(cm.exception.errno, errno.ENODEV)
        finally:
            os.close(fd)
        man = os.path.join(pathmount.REPO, "man", "kvfs.7")
        with open(man) as f:
            text = f.read()
        self.assertTrue("MAP_SHARED" in text and "ENODEV" in text,
                        "kvfs(7) does not document the ENODEV")


if __name__ == "__main__":
    unittest.main()
