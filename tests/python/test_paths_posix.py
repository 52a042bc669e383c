#!/usr/bin/python3
"""Path namespaces: POSIX behaviour and bad input.

Directories (mkdir -p, rmdir, large readdir), any file name, publication
at close and at rename, os.replace over an open file, O_TRUNC versions,
O_DIRECT, utimensat, statvfs, fsync, readv/pwritev; and every bad input the
issue lists: ENAMETOOLONG, '.' and '..' games, EXDEV, ENOTEMPTY, hard
links / symlinks / device nodes (EPERM), a writer killed mid-file, two
writers racing on one target, the directory limit (ENOSPC), EBUSY when the
mode of a non-empty namespace changes; and that a key namespace behaves as
before.
"""
import errno
import mmap
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

pathmount.need("daemon")

M = None
PATH_MAX_NS = 1024  # the documented limit of a path below its namespace


def setUpModule():
    global M
    M = pathmount.new_mount(["names=paths", "l1_size=16M", "max_chunk=4M",
                             "tmp_timeout=2", "max_dirs=3000"], l2=False)


def tearDownModule():
    pathmount.drop_mount(M)


def put(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def get(path):
    with open(path, "rb") as f:
        return f.read()


def expect_errno(test, err, fn, *args):
    with test.assertRaises(OSError) as cm:
        fn(*args)
    test.assertEqual(cm.exception.errno, err,
                     "%s%r: %s" % (fn.__name__, args, cm.exception))


def wait_gone(path, s=3.0):
    end = time.monotonic() + s
    while os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.02)
    return not os.path.exists(path)


class Paths(unittest.TestCase):
    def ns(self, name):
        p = os.path.join(M.mnt, name)
        os.mkdir(p)
        return p

    def test_tree_and_names(self):
        ns = self.ns("tree")
        os.makedirs(os.path.join(ns, "a/b/c/d"))
        os.makedirs(os.path.join(ns, "a/b/c/d"), exist_ok=True)
        expect_errno(self, errno.EEXIST, os.mkdir, os.path.join(ns, "a"))
        names = ["config.json", ".meta", "x y", "...", "-", "\u00e9t\u00e9",
                 "a" * 255, "0123456789abcdef0123456789abcdef",
                 "k.tmp.1.2.3", "\t"]
        for n in names:
            put(os.path.join(ns, "a/b", n), n.encode() * 3)
        for n in names:
            self.assertEqual(get(os.path.join(ns, "a/b", n)), n.encode() * 3)
        self.assertEqual(sorted(os.listdir(os.path.join(ns, "a/b"))),
                         sorted(names + ["c"]))
        st = os.stat(os.path.join(ns, "a/b/config.json"))
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(st.st_size, len("config.json") * 3)
        self.assertTrue(stat.S_ISDIR(os.stat(os.path.join(ns, "a/b/c"))
                                     .st_mode))
        expect_errno(self, errno.ENOTEMPTY, os.rmdir, os.path.join(ns, "a/b"))
        expect_errno(self, errno.ENOTDIR, os.mkdir,
                     os.path.join(ns, "a/b/.meta/x"))
        expect_errno(self, errno.ENOENT, os.open,
                     os.path.join(ns, "nope/x"), os.O_RDONLY)
        os.rmdir(os.path.join(ns, "a/b/c/d"))
        self.assertEqual(os.listdir(os.path.join(ns, "a/b/c")), [])
        for n in names:
            os.unlink(os.path.join(ns, "a/b", n))
        expect_errno(self, errno.ENOENT, os.unlink,
                     os.path.join(ns, "a/b/config.json"))
        os.rmdir(os.path.join(ns, "a/b/c"))
        os.rmdir(os.path.join(ns, "a/b"))
        os.rmdir(os.path.join(ns, "a"))
        self.assertEqual(os.listdir(ns), [])
        os.rmdir(ns)  # an empty path namespace goes like any other

    def test_empty_file_is_a_file(self):
        # touch: an empty file is published (as on any filesystem), with
        # the mode of every path file, while open and after close
        ns = self.ns("empty")
        p = os.path.join(ns, "marker")
        fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
        st = os.fstat(fd)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)
        self.assertEqual(st.st_size, 0)
        self.assertEqual(st.st_nlink, 1)
        os.close(fd)
        st = os.stat(p)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)
        self.assertEqual(st.st_size, 0)
        self.assertEqual(get(p), b"")
        self.assertEqual(os.listdir(ns), ["marker"])

    def test_large_directory(self):
        ns = self.ns("large")
        # empty files: the names are the point (small files would be
        # evicted from this mount's 16 MiB L1, and vanish without L2)
        for i in range(1500):
            os.close(os.open(os.path.join(ns, "f%05d" % i),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        for i in range(300):
            os.mkdir(os.path.join(ns, "d%04d" % i))
        with os.scandir(ns) as it:
            ents = list(it)
        self.assertEqual(len(ents), 1800)
        self.assertEqual(sum(1 for e in ents if e.is_file()), 1500)
        self.assertEqual(sum(1 for e in ents if e.is_dir()), 300)
        self.assertEqual(len(set(e.name for e in ents)), 1800)
        self.assertEqual(os.stat(os.path.join(ns, "f01234")).st_size, 0)

    def test_name_and_path_limits(self):
        ns = self.ns("limits")
        expect_errno(self, errno.ENAMETOOLONG, put,
                     os.path.join(ns, "n" * 256), b"x")
        expect_errno(self, errno.ENAMETOOLONG, os.mkdir,
                     os.path.join(ns, "n" * 256))
        # a path of exactly PATH_MAX_NS bytes below the namespace works,
        # one byte more does not
        parts = ["d" * 200] * 4  # 804 bytes with the slashes
        os.makedirs(os.path.join(ns, *parts))
        rel = "/".join(parts)
        last = "f" * (PATH_MAX_NS - len(rel) - 1)
        put(os.path.join(ns, rel, last), b"deep")
        self.assertEqual(get(os.path.join(ns, rel, last)), b"deep")
        expect_errno(self, errno.ENAMETOOLONG, put,
                     os.path.join(ns, rel, last + "g"), b"x")
        expect_errno(self, errno.ENAMETOOLONG, os.mkdir,
                     os.path.join(ns, rel, last + "g"))
        expect_errno(self, errno.ENAMETOOLONG, os.rename,
                     os.path.join(ns, rel, last),
                     os.path.join(ns, rel, last + "g"))
        self.assertEqual(get(os.path.join(ns, rel, last)), b"deep")

    def test_dot_games(self):
        ns = self.ns("dots")
        os.makedirs(os.path.join(ns, "a/b"))
        put(os.path.join(ns, "a/b/../x"), b"x")
        self.assertEqual(get(os.path.join(ns, "a/x")), b"x")
        self.assertEqual(get(os.path.join(ns, "a/./b/.././x")), b"x")
        expect_errno(self, errno.EEXIST, os.mkdir, os.path.join(ns, "a/."))
        expect_errno(self, errno.EINVAL, os.rmdir, os.path.join(ns, "a/b/."))
        expect_errno(self, errno.ENOTEMPTY, os.rmdir,
                     os.path.join(ns, "a/b/.."))
        expect_errno(self, errno.EINVAL, os.rename, os.path.join(ns, "a"),
                     os.path.join(ns, "a/b/a"))
        # '..' out of the namespace is another namespace: EXDEV on rename
        other = self.ns("dots2")
        expect_errno(self, errno.EXDEV, os.rename, os.path.join(ns, "a/x"),
                     os.path.join(ns, "a/../../dots2/x"))
        self.assertEqual(os.listdir(other), [])
        # names that only look like dots are ordinary
        put(os.path.join(ns, "..."), b"3")
        put(os.path.join(ns, ". "), b"4")
        self.assertEqual(get(os.path.join(ns, "...")), b"3")

    def test_exdev_enotempty(self):
        ns = self.ns("mv")
        keyns = os.path.join(M.mnt, "mv-keys")
        os.mkdir(keyns)
        os.setxattr(keyns, "user.kvfs.names", b"keys")
        put(os.path.join(ns, "f"), b"f")
        expect_errno(self, errno.EXDEV, os.rename, os.path.join(ns, "f"),
                     os.path.join(keyns, "0" * 32))
        put(os.path.join(keyns, ".t"), b"t")
        expect_errno(self, errno.EXDEV, os.rename, os.path.join(keyns, ".t"),
                     os.path.join(ns, "t"))
        os.makedirs(os.path.join(ns, "src/s"))
        os.makedirs(os.path.join(ns, "dst/full"))
        expect_errno(self, errno.ENOTEMPTY, os.rename,
                     os.path.join(ns, "src"), os.path.join(ns, "dst"))
        os.mkdir(os.path.join(ns, "empty"))
        os.rename(os.path.join(ns, "empty"), os.path.join(ns, "moved"))
        self.assertTrue(os.path.isdir(os.path.join(ns, "moved")))
        os.rename(os.path.join(ns, "moved"), os.path.join(ns, "src/s"))
        self.assertFalse(os.path.exists(os.path.join(ns, "moved")))
        expect_errno(self, errno.EISDIR, os.rename, os.path.join(ns, "f"),
                     os.path.join(ns, "src"))
        expect_errno(self, errno.ENOTDIR, os.rename, os.path.join(ns, "src"),
                     os.path.join(ns, "f"))
        # a directory holding files would change every file's key: EXDEV
        # (mv(1) then copies)
        put(os.path.join(ns, "dst/full/g"), b"g")
        expect_errno(self, errno.EXDEV, os.rename,
                     os.path.join(ns, "dst/full"), os.path.join(ns, "full2"))
        # renaming a published file to another name keeps its bytes
        os.rename(os.path.join(ns, "dst/full/g"), os.path.join(ns, "g2"))
        self.assertEqual(get(os.path.join(ns, "g2")), b"g")
        self.assertFalse(os.path.exists(os.path.join(ns, "dst/full/g")))

    def test_links_symlinks_nodes(self):
        ns = self.ns("links")
        put(os.path.join(ns, "f"), b"f")
        expect_errno(self, errno.EPERM, os.link, os.path.join(ns, "f"),
                     os.path.join(ns, "h"))
        expect_errno(self, errno.EPERM, os.symlink, "f",
                     os.path.join(ns, "s"))
        expect_errno(self, errno.EPERM, os.mkfifo, os.path.join(ns, "p"))
        expect_errno(self, errno.EPERM, os.mknod, os.path.join(ns, "n"),
                     stat.S_IFSOCK | 0o644)
        self.assertEqual(sorted(os.listdir(ns)), ["f"])

    def test_published_files_never_change_in_place(self):
        ns = self.ns("versions")
        p = os.path.join(ns, "v")
        put(p, b"A" * 100000)
        old = open(p, "rb")
        expect_errno(self, errno.EPERM, os.open, p, os.O_WRONLY)
        expect_errno(self, errno.EPERM, os.open, p, os.O_RDWR | os.O_APPEND)
        expect_errno(self, errno.EPERM, os.truncate, p, 10)
        # O_TRUNC starts a new version; the old stays until it is closed
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"B" * 50000)
        self.assertEqual(get(p), b"A" * 100000)  # not replaced yet
        os.close(fd)
        self.assertEqual(get(p), b"B" * 50000)
        self.assertEqual(old.read(), b"A" * 100000)  # kept its bytes
        old.close()
        # os.replace over an open file: the reader keeps the old bytes
        q = os.path.join(ns, "q.tmp")
        put(q, b"C" * 70000)
        old = open(p, "rb")
        os.replace(q, p)
        self.assertEqual(get(p), b"C" * 70000)
        self.assertFalse(os.path.exists(q))
        self.assertEqual(old.read(), b"B" * 50000)
        old.close()
        self.assertEqual(os.listdir(ns), ["v"])

    def test_fd_link_of_a_just_renamed_file(self):
        """A file written under a temporary name, renamed and opened at
        once (vLLM's and LMCache's stores, then a reader): the fd's
        /proc/self/fd link is the name, never "NAME (deleted)". The
        daemon's background thread dropped the kernel's entry of the
        writer after the rename; a reader that had opened the name
        first had its entry dropped with it (about 1 in 300 here)."""
        ns = self.ns("fdlink")
        bad = []
        for i in range(600):
            p = os.path.join(ns, "f%d" % i)
            put(p + ".tmp", b"x" * 4000)
            os.rename(p + ".tmp", p)
            fd = os.open(p, os.O_RDONLY)
            try:
                time.sleep(0.001)  # the background thread's turn
                link = os.readlink("/proc/self/fd/%d" % fd)
                if link != p:
                    bad.append(link)
                self.assertEqual(os.read(fd, 5000), b"x" * 4000)
            finally:
                os.close(fd)
        self.assertEqual(bad, [])

    def test_reader_joined_while_written(self):
        """A reader that opens a file while it is written reads what was
        written so far; the writer's close publishes the file all the
        same (the reader kept it unpublished: a killed O_TRUNC writer
        then joined it and had its 200 torn bytes published, the
        closed version gone), and the reader keeps that version's bytes
        after a next version replaced it (it read the next one)."""
        ns = self.ns("joined")
        p = os.path.join(ns, "f")
        v1 = b"1" * 6000
        w = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(w, v1[:3000])
        r = os.open(p, os.O_RDONLY)
        self.assertEqual(os.pread(r, 10000, 0), v1[:3000])
        os.write(w, v1[3000:])
        os.close(w)
        pid = os.fork()
        if pid == 0:
            try:
                fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
                os.write(fd, b"2" * 200)
            finally:
                os.kill(os.getpid(), signal.SIGKILL)
        os.waitpid(pid, 0)
        time.sleep(0.3)
        self.assertEqual(get(p), v1)  # the killed writer published nothing
        self.assertEqual(os.pread(r, 10000, 0), v1)
        put(p, b"3" * 1000)  # a next version, whole
        self.assertEqual(get(p), b"3" * 1000)
        self.assertEqual(os.pread(r, 10000, 0), v1)  # still the one it read
        os.close(r)
        self.assertEqual(get(p), b"3" * 1000)

    def test_shell_redirect_over_a_file(self):
        """`echo x > file` over a published file: the shell opens it
        O_TRUNC, dup2s the fd to 1 and closes the fd it opened before
        writing. That first close must not publish the still-empty
        version (the write then failed with EPERM and the file was left
        empty); an O_TRUNC open closed with nothing written empties it."""
        ns = self.ns("redirect")
        p = os.path.join(ns, "cfg")
        put(p, b"v1\n")
        for sh, data in (("sh", b"v2\n"), ("bash", b"v3\n")):
            r = subprocess.run([sh, "-c", "echo %s > %s" %
                                (data.decode().strip(), p)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(get(p), data)
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        d = os.dup(fd)
        os.close(fd)
        os.write(d, b"via a dup")
        os.close(d)
        self.assertEqual(get(p), b"via a dup")
        # an O_TRUNC open closed with nothing written and no dup: empty
        # when close returns, as any new version
        os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))
        self.assertEqual(os.stat(p).st_size, 0)
        self.assertEqual(get(p), b"")
        # a new name written through the shell's dup, read meanwhile
        # (`tail -f`): the reader's open does not publish it half
        # written (the shell's close of its first fd made it look
        # closed: the later echo got EPERM)
        q = os.path.join(ns, "log")
        sh = subprocess.Popen(["sh", "-c", "(echo a; sleep 0.4; echo b) > " + q],
                              stderr=subprocess.PIPE)
        time.sleep(0.2)
        with open(q, "rb") as f:
            self.assertEqual(f.read(), b"a\n")
        _, err = sh.communicate(timeout=10)
        self.assertEqual((sh.returncode, err), (0, b""))
        self.assertEqual(get(q), b"a\nb\n")
        # fsync'ed while a dup is open: published (and durable) by the
        # close, as fsync promised
        put(p, b"v4")
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        d = os.dup(fd)
        os.fsync(fd)
        os.close(fd)
        self.assertEqual(os.stat(p).st_size, 0)
        os.close(d)

    def test_chmod_while_a_new_version_is_written(self):
        """An fchmod/fchown on an O_TRUNC writer's fd (one inode to the
        kernel) is the new version's mode and owner once it is closed,
        whether the version it replaces was published long ago or its
        own close is still being published; so is a chmod by path."""
        ns = self.ns("rechmod")
        for delay in (0, 0.5):
            for how in ("fchmod", "chmod"):
                p = os.path.join(ns, "f%s_%s" % (how, delay))
                put(p, b"A" * 1000)
                time.sleep(delay)
                fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
                os.write(fd, b"B" * 2000)
                if how == "fchmod":
                    os.fchmod(fd, 0o600)
                    os.fchown(fd, 1000, 1000)
                    os.utime(fd)  # only the times: the mode stays
                else:
                    os.chmod(p, 0o600)
                    os.chown(p, 1000, 1000)
                os.close(fd)
                st = os.stat(p)
                self.assertEqual((st.st_mode & 0o7777, st.st_uid, st.st_gid,
                                  st.st_size), (0o600, 1000, 1000, 2000),
                                 "%s, %s s after the first close" %
                                 (how, delay))
                self.assertEqual(get(p), b"B" * 2000)

    def test_odirect_utimens_statvfs_fsync_vectored(self):
        ns = self.ns("calls")
        p = os.path.join(ns, "d.bin")
        buf = mmap.mmap(-1, 1 << 20)
        buf.write(bytes(range(256)) * 4096)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT,
                     0o644)
        self.assertEqual(os.pwritev(fd, [memoryview(buf)[:4096],
                                         memoryview(buf)[4096:]], 0),
                         1 << 20)
        os.fsync(fd)
        os.fdatasync(fd)
        os.close(fd)
        rd = mmap.mmap(-1, 1 << 20)
        fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
        self.assertEqual(os.readv(fd, [memoryview(rd)[:8192],
                                       memoryview(rd)[8192:]]), 1 << 20)
        os.fsync(fd)
        os.close(fd)
        self.assertEqual(rd[:], buf[:])
        os.utime(p, ns=(1_000_000_000_123, 2_000_000_000_456))
        st = os.stat(p)
        self.assertEqual(st.st_mtime_ns, 2_000_000_000_456)
        os.utime(os.path.join(ns), ns=(5_000_000_000, 6_000_000_000))
        self.assertEqual(os.stat(ns).st_mtime_ns, 6_000_000_000)
        sv = os.statvfs(p)
        self.assertGreater(sv.f_blocks, 0)
        self.assertGreaterEqual(sv.f_namemax, 255)

    def test_writer_killed_mid_file_is_never_published(self):
        ns = self.ns("killed")
        p = os.path.join(ns, "half.bin")
        code = ("import os,signal\n"
                "fd=os.open(%r,os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o644)\n"
                "os.write(fd,b'x'*300000)\n"
                "os.kill(os.getpid(),signal.SIGKILL)\n" % p)
        r = subprocess.run([sys.executable, "-c", code])
        self.assertEqual(r.returncode, -signal.SIGKILL)
        self.assertTrue(wait_gone(p), "a killed writer's file was kept")
        # and a killed writer of a new version leaves the old one
        put(p, b"old")
        code = code.replace("O_CREAT|os.O_TRUNC", "O_TRUNC")
        r = subprocess.run([sys.executable, "-c", code])
        self.assertEqual(r.returncode, -signal.SIGKILL)
        end = time.monotonic() + 3
        while time.monotonic() < end and get(p) != b"old":
            time.sleep(0.02)
        self.assertEqual(get(p), b"old")

    def test_two_writers_race_on_one_target(self):
        ns = self.ns("race")
        for rnd in range(20):
            dest = os.path.join(ns, "blk%d.bin" % rnd)
            go = threading.Barrier(2)
            datas = [bytes([65 + w]) * 100000 for w in range(2)]

            def writer(w):
                go.wait()
                if os.path.exists(dest):
                    return
                tmp = dest + "_%d.tmp" % w
                fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY |
                             os.O_TRUNC, 0o644)
                os.write(fd, datas[w])
                os.close(fd)
                os.replace(tmp, dest)

            ts = [threading.Thread(target=writer, args=(w,))
                  for w in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertIn(get(dest), datas, "round %d: a mix" % rnd)
        self.assertEqual(len(os.listdir(ns)), 20)

    def test_directory_limit(self):
        ns = self.ns("many")
        made = 0
        with self.assertRaises(OSError) as cm:
            for i in range(10000):
                os.mkdir(os.path.join(ns, "d%d" % i))
                made += 1
        self.assertEqual(cm.exception.errno, errno.ENOSPC)
        self.assertLessEqual(made, 3000)
        st = pathmount.stats(M.mnt)
        self.assertGreaterEqual(st["paths"]["dirs"], made)
        for i in range(made):
            os.rmdir(os.path.join(ns, "d%d" % i))
        os.mkdir(os.path.join(ns, "again"))  # the budget came back

    def test_namespace_mode(self):
        ns = self.ns("mode")
        self.assertEqual(os.getxattr(ns, "user.kvfs.names"), b"paths")
        self.assertIn("user.kvfs.names", os.listxattr(ns))
        os.setxattr(ns, "user.kvfs.names", b"keys")
        self.assertEqual(os.getxattr(ns, "user.kvfs.names"), b"keys")
        expect_errno(self, errno.EINVAL, os.setxattr, ns, "user.kvfs.names",
                     b"files")
        os.setxattr(ns, "user.kvfs.names", b"paths")
        put(os.path.join(ns, "f"), b"f")
        expect_errno(self, errno.EBUSY, os.setxattr, ns, "user.kvfs.names",
                     b"keys")
        os.unlink(os.path.join(ns, "f"))
        os.mkdir(os.path.join(ns, "d"))
        expect_errno(self, errno.EBUSY, os.setxattr, ns, "user.kvfs.names",
                     b"keys")
        os.rmdir(os.path.join(ns, "d"))
        os.setxattr(ns, "user.kvfs.names", b"keys")

    def test_key_namespace_unchanged(self):
        ns = self.ns("keys")
        os.setxattr(ns, "user.kvfs.names", b"keys")
        key = "0123456789abcdef0123456789abcdef"
        put(os.path.join(ns, key), b"k", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        self.assertEqual(get(os.path.join(ns, key)), b"k")
        expect_errno(self, errno.EEXIST, put, os.path.join(ns, key), b"k",
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        expect_errno(self, errno.EPERM, os.open, os.path.join(ns, key),
                     os.O_WRONLY | os.O_TRUNC)
        expect_errno(self, errno.EINVAL, put, os.path.join(ns, "config.json"),
                     b"x")
        # as before: the lookup of a name that is no key says EINVAL
        expect_errno(self, errno.EINVAL, os.mkdir, os.path.join(ns, "sub"))
        put(os.path.join(ns, ".tmp1"), b"t")
        os.rename(os.path.join(ns, ".tmp1"),
                  os.path.join(ns, "f" * 32))
        self.assertEqual(sorted(os.listdir(ns)), sorted([key, "f" * 32]))
        self.assertEqual(os.stat(os.path.join(ns, key)).st_mode & 0o777,
                         0o444)
        expect_errno(self, errno.EBUSY, os.setxattr, ns, "user.kvfs.names",
                     b"paths")


class DefaultKeys(unittest.TestCase):
    """Without -o names=paths a new namespace is a key namespace."""

    def test_default_is_keys(self):
        m = pathmount.new_mount(["l1_size=8M", "max_chunk=1M"], l2=False)
        try:
            ns = os.path.join(m.mnt, "n")
            os.mkdir(ns)
            self.assertEqual(os.getxattr(ns, "user.kvfs.names"), b"keys")
            expect_errno(self, errno.EINVAL, put,
                         os.path.join(ns, "config.json"), b"x")
            os.setxattr(ns, "user.kvfs.names", b"paths")
            put(os.path.join(ns, "config.json"), b"x")
            self.assertEqual(get(os.path.join(ns, "config.json")), b"x")
        finally:
            pathmount.drop_mount(m)


class EvictionWithoutL2(unittest.TestCase):
    """An evicted file simply vanishes; nothing is ever served wrong."""

    def test_evicted_files_vanish(self):
        ns = os.path.join(M.mnt, "evict")
        os.mkdir(ns)
        blk = 1 << 20
        for i in range(40):  # 40 MiB through a 16 MiB L1
            put(os.path.join(ns, "b%02d" % i), bytes([i]) * blk)
        # the daemon drops the names of evicted files in the background:
        # a lookup finds them gone at once, a listing a moment later
        present = 0
        for i in range(40):
            p = os.path.join(ns, "b%02d" % i)
            try:
                data = get(p)
            except FileNotFoundError:
                continue
            present += 1
            self.assertEqual(data, bytes([i]) * blk, p)
        self.assertGreater(present, 0)
        self.assertLess(present, 40)
        end = time.monotonic() + 3
        while len(os.listdir(ns)) != present and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(len(os.listdir(ns)), present)



class WarmRestart(unittest.TestCase):
    """The names of path namespaces across a restart: l2_dir/paths."""

    def test_journal_damage_and_orphans(self):
        m = pathmount.new_mount(["names=paths", "l1_size=16M",
                                 "max_chunk=4M", "l2_size=256M",
                                 "flush_on_exit=1"])
        try:
            ns = os.path.join(m.mnt, "j")
            os.mkdir(ns)
            os.makedirs(os.path.join(ns, "a/b"))
            os.mkdir(os.path.join(ns, "empty"))
            put(os.path.join(ns, "a/b/one"), b"1" * 5000)
            put(os.path.join(ns, "a/two"), b"2" * 5000)
            os.mkdir(os.path.join(ns, "gone"))
            os.rmdir(os.path.join(ns, "gone"))
            m.unmount()
            journal = os.path.join(m.l2, "paths")
            size = os.path.getsize(journal)
            self.assertGreater(size, 0)
            with open(journal, "ab") as f:  # a torn record at the end
                f.write(b"KVP1\x00\x01garbage")
            m.mount()
            self.assertEqual(get(os.path.join(ns, "a/b/one")), b"1" * 5000)
            self.assertEqual(get(os.path.join(ns, "a/two")), b"2" * 5000)
            self.assertTrue(os.path.isdir(os.path.join(ns, "empty")))
            self.assertFalse(os.path.exists(os.path.join(ns, "gone")))
            self.assertEqual(os.getxattr(ns, "user.kvfs.names"), b"paths")
            put(os.path.join(ns, "three"), b"3" * 5000)
            m.unmount()
            # compacted at the last mount: no garbage; now cut the record
            # of "three" in half: its chunk has no name and is dropped
            with open(journal, "rb") as f:
                data = f.read()
            at = max(data.rfind(b"KVP1"),  # a file's record: KVP2
                     data.rfind(b"KVP2"))
            with open(journal, "wb") as f:
                f.write(data[:at + 10])
            m.mount()
            self.assertFalse(os.path.exists(os.path.join(ns, "three")))
            self.assertEqual(get(os.path.join(ns, "a/two")), b"2" * 5000)
            st = pathmount.stats(m.mnt)
            self.assertEqual(st["namespaces"]["j"]["chunks"], 2)
            self.assertEqual(st["paths"]["orphans"], 1)
            self.assertEqual(st["paths"]["files"], 2)
            # an empty path namespace comes back in path mode; a removed
            # one does not come back
            os.mkdir(os.path.join(m.mnt, "e"))
            os.mkdir(os.path.join(m.mnt, "r"))
            os.rmdir(os.path.join(m.mnt, "r"))
            m.remount()
            self.assertEqual(os.getxattr(os.path.join(m.mnt, "e"),
                                         "user.kvfs.names"), b"paths")
            self.assertFalse(os.path.exists(os.path.join(m.mnt, "r")))
        finally:
            pathmount.drop_mount(m)


class GroupLookupByPath(unittest.TestCase):
    """kvfs_group_lookup_paths: the run every namespace holds."""

    def test_group_lookup_paths(self):
        import ctypes
        sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
        lib_path = os.path.join(pathmount.PLAIN, "libkvfs.so")
        if not os.path.exists(lib_path):
            self.skipTest("no libkvfs.so at %s" % lib_path)
        lib = ctypes.CDLL(lib_path)
        rels = ["m/%03d/blk.bin" % i for i in range(6)]
        for r, n in (("r0", 6), ("r1", 4)):
            os.mkdir(os.path.join(M.mnt, "g" + r))
            for rel in rels[:n]:
                os.makedirs(os.path.dirname(os.path.join(M.mnt, "g" + r,
                                                         rel)),
                            exist_ok=True)
                put(os.path.join(M.mnt, "g" + r, rel), b"x" * 100)
        fd = os.open(M.mnt, os.O_RDONLY | os.O_DIRECTORY)
        try:
            nss = (ctypes.c_char_p * 2)(b"gr0", b"gr1")
            paths = (ctypes.c_char_p * 6)(*[p.encode() for p in rels])
            f = lib.kvfs_group_lookup_paths
            f.restype = ctypes.c_long
            f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                          ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32,
                          ctypes.c_uint, ctypes.c_uint32, ctypes.c_void_p]
            self.assertEqual(f(fd, nss, 2, paths, 6, 0, 0, 0, None), 4)
            bad = (ctypes.c_char_p * 1)(b"m/../x")
            self.assertEqual(f(fd, nss, 2, bad, 1, 0, 0, 0, None),
                             -errno.EINVAL)
        finally:
            os.close(fd)


if __name__ == "__main__":
    unittest.main()
