#!/usr/bin/python3
"""fsync is a promise (issue 26 review r6): on a mount with L2, a file
whose fsync (or fdatasync) returned 0 survives SIGKILL of the daemon: a
remount on the same l2_dir has it, with its bytes. Key namespaces and
path namespaces, ingest=evicted (nothing reaches L2 without an eviction)
and ingest=all (written in the background, maybe not yet): write, fsync,
close; a temporary fsync'ed and renamed onto its key; fdatasync; fsync of
a reader's fd of a published chunk; in a path namespace a new version
(O_TRUNC) fsync'ed, a file fsync'ed, closed, then renamed, and files
opened by a thread that exited and fsync'ed and closed by another, and
files a reader opened while they were written. Without L2, fsync returns 0 (memory
only, as tmpfs); with L2 configured but disabled, EIO. Mounts real kvfs daemons ($KVFS_MOUNT_BIN); a few
seconds.
"""
import errno
import hashlib
import os
import signal
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

OPTS = ["l1_size=64M", "max_chunk=4M", "l2_size=256M"]


def write_file(path, data, sync="fsync", excl=True):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT |
                 (os.O_EXCL if excl else os.O_TRUNC), 0o644)
    try:
        os.write(fd, data)
        if sync == "fsync":
            os.fsync(fd)
        elif sync == "fdatasync":
            os.fdatasync(fd)
    finally:
        os.close(fd)


def kill_and_remount(m):
    """SIGKILL the daemon (no unmount, no checkpoint, no flush), drop
    the dead mount, and mount again on the same l2_dir."""
    m.daemon.send_signal(signal.SIGKILL)
    m.daemon.wait(30)
    m.daemon = None
    if m.log:
        m.log.close()
    subprocess.call(["fusermount3", "-uz", m.mnt], stderr=subprocess.DEVNULL)
    m.mount()


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


class FsyncCrashTest(unittest.TestCase):
    def crash_case(self, ingest):
        m = pathmount.new_mount(OPTS + ["ingest=" + ingest], l2=True)
        try:
            kk = os.path.join(m.mnt, "kk")
            pp = os.path.join(m.mnt, "pp")
            os.mkdir(kk)
            os.mkdir(pp)
            os.setxattr(pp, "user.kvfs.names", b"paths")
            os.mkdir(os.path.join(pp, "sub"))
            want = {}
            for i in range(4):
                data = os.urandom((1 << 20) + 4097 * i)
                sync = "fdatasync" if i == 3 else "fsync"
                k = os.path.join(kk, "%032x" % (0xabc0 + i))
                p = os.path.join(pp, "sub" if i % 2 else "", "f%d" % i)
                write_file(k, data, sync)
                write_file(p, data, sync)
                want[k] = want[p] = hashlib.sha1(data).hexdigest()
            # a temporary fsync'ed, then renamed onto its key
            data = os.urandom(300001)
            tmp = os.path.join(kk, ".tmp.1")
            write_file(tmp, data)
            k = os.path.join(kk, "%032x" % 0xdef0)
            os.rename(tmp, k)
            want[k] = hashlib.sha1(data).hexdigest()
            # path namespace: a new version (O_TRUNC) fsync'ed; and the
            # idiom write, fsync, close, rename (the rename copies the
            # published file: the copy must be as durable)
            v = os.path.join(pp, "versioned")
            write_file(v, os.urandom(150001), sync=None)
            data = os.urandom(160001)
            write_file(v, data, excl=False)
            want[v] = hashlib.sha1(data).hexdigest()
            data = os.urandom(170001)
            tmp = os.path.join(pp, "sub", ".tmp.renamed")
            write_file(tmp, data)
            os.rename(tmp, os.path.join(pp, "sub", "renamed"))
            want[os.path.join(pp, "sub", "renamed")] = \
                hashlib.sha1(data).hexdigest()
            # a thread pool: opened by a thread that has exited, written,
            # fsync'ed and closed by another thread of the process (a new
            # file; a new version, O_TRUNC, of a published one)
            write_file(os.path.join(pp, "pooled2"), os.urandom(100001),
                       sync=None)
            for name, flags in (("pooled", os.O_CREAT | os.O_EXCL),
                                ("pooled2", os.O_TRUNC)):
                path = os.path.join(pp, name)
                box = []
                t = threading.Thread(target=lambda p=path, f=flags: box.append(
                    os.open(p, os.O_WRONLY | f, 0o644)))
                t.start()
                t.join()
                data = os.urandom(180001)
                os.write(box[0], data)
                os.fsync(box[0])
                os.close(box[0])
                want[path] = hashlib.sha1(data).hexdigest()
            # a reader opens the file while it is written: the writer's
            # fsync and close publish it all the same (a new file; a new
            # version, O_TRUNC), the reader's fd kept past the kill (it
            # joined the writer and kept the close from publishing)
            readers = []
            write_file(os.path.join(pp, "read-held2"), os.urandom(90001),
                       sync=None)
            for name, flags in (("read-held", os.O_CREAT | os.O_EXCL),
                                ("read-held2", os.O_TRUNC)):
                path = os.path.join(pp, name)
                data = os.urandom(190001)
                fd = os.open(path, os.O_WRONLY | flags, 0o644)
                os.write(fd, data)
                os.fsync(fd)
                readers.append(os.open(path, os.O_RDONLY))
                os.close(fd)
                want[path] = hashlib.sha1(data).hexdigest()
            # published without fsync, then fsync'ed through a reader's fd
            for path in (os.path.join(kk, "%032x" % 0xfee0),
                         os.path.join(pp, "read-synced")):
                data = os.urandom(200003)
                write_file(path, data, sync=None)
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                want[path] = hashlib.sha1(data).hexdigest()
            st = pathmount.stats(m.mnt)["l2"]

            kill_and_remount(m)
            for fd in readers:  # of the dead mount: ENOTCONN
                try:
                    os.close(fd)
                except OSError:
                    pass
            lost = [p for p, h in sorted(want.items())
                    if not os.path.exists(p) or sha(p) != h]
            self.assertEqual(lost, [], "fsync'ed files lost by a "
                             "SIGKILL (ingest=%s)" % ingest)
            # one fdatasync per fsync'ed chunk at least (segments and
            # l2_dir), and under ingest=evicted the chunks had no L2 copy
            self.assertGreaterEqual(st["syncs"], len(want))
            if ingest == "evicted":  # the rename's copy too
                self.assertEqual(st["sync_writes"], len(want) + 1)
        finally:
            pathmount.drop_mount(m)

    def test_evicted(self):
        self.crash_case("evicted")

    def test_all(self):
        self.crash_case("all")

    def test_l2_disabled_is_eio(self):
        """l2_dir given but unusable (L2 disabled, L1 serving): no crash
        promise can be made, so fsync of a published chunk and the close
        of a writer fsync'ed before it are EIO; the file stays published
        in memory (kvfs(7), fsync)."""
        m = pathmount.Mount(OPTS, l2=True)
        pathmount._MOUNTS.append(m)
        os.rmdir(m.l2)  # missing: the mount serves L1 and logs why
        try:
            m.mount()
            os.mkdir(os.path.join(m.mnt, "kk"))
            k = os.path.join(m.mnt, "kk", "%032x" % 2)
            fd = os.open(k, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"y" * 7000)
            os.fsync(fd)  # marks the writer: the close does the work
            with self.assertRaises(OSError) as cm:
                os.close(fd)
            self.assertEqual(cm.exception.errno, errno.EIO)
            with open(k, "rb") as f:  # published in memory all the same
                self.assertEqual(f.read(), b"y" * 7000)
                with self.assertRaises(OSError) as cm:
                    os.fsync(f.fileno())
                self.assertEqual(cm.exception.errno, errno.EIO)
        finally:
            pathmount.drop_mount(m)

    def test_no_l2_fsync_is_zero(self):
        m = pathmount.new_mount(OPTS, l2=False)
        try:
            os.mkdir(os.path.join(m.mnt, "kk"))
            k = os.path.join(m.mnt, "kk", "%032x" % 1)
            write_file(k, b"x" * 5000)  # fsync returns 0: memory only
            fd = os.open(k, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self.assertEqual(pathmount.stats(m.mnt)["l2"].get("syncs"), 0)
        finally:
            pathmount.drop_mount(m)


if __name__ == "__main__":
    pathmount.need("daemon")
    unittest.main()
