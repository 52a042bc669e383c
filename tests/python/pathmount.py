"""Mount helper of the path-namespace tests (test_paths_*.py).

Each test module mounts its own kvfs (daemon: $KVFS_MOUNT_BIN, the ASan
build by default; it is a subprocess) on a temporary directory, with an L2
directory of its own so a remount is a warm restart. Always unmounts, also
when a test fails or the run is interrupted. Exit 77 (skip) when the daemon
or numpy is missing.
"""
import atexit
import mmap
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
MOUNT_BIN = os.environ.get("KVFS_MOUNT_BIN",
                           os.path.join(REPO, "build", "asan", "kvfs-mount"))
PLAIN = os.environ.get("KVFS_PLAIN_BUILD", "build")
if not os.path.isabs(PLAIN):
    PLAIN = os.path.join(REPO, PLAIN)
CTL_BIN = os.environ.get("KVFS_CTL_BIN", os.path.join(PLAIN, "kvfsctl"))

# 2 MiB blocks, an L1 that holds about ten of them: a test that stores
# twenty-four blocks sees most of them evicted to L2.
BLOCK = 2 << 20
BASE_OPTS = ["names=paths", "l1_size=24M", "max_chunk=4M", "l2_size=256M",
             "ingest=evicted", "flush_on_exit=1", "tmp_timeout=2"]


def need(what):
    """Skip the whole module (exit 77) unless what is available."""
    if what == "daemon" and not os.access(MOUNT_BIN, os.X_OK):
        print("skip: no kvfs-mount at %s" % MOUNT_BIN)
        sys.exit(77)
    if what == "numpy":
        try:
            import numpy  # noqa: F401
        except ImportError:
            print("skip: numpy not importable by %s" % sys.executable)
            sys.exit(77)


def _mounted(path):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4] == path:
                return True
    return False


class Mount:
    """One kvfs mount point; mount()/unmount() may be called repeatedly on
    the same L2 directory (a warm restart)."""

    def __init__(self, opts=None, l2=True, pass_fds=()):
        self.pass_fds = tuple(pass_fds)  # fds the daemon inherits
        self.mnt = tempfile.mkdtemp(prefix="kvfs-paths.")
        self.l2 = tempfile.mkdtemp(prefix="kvfs-paths-l2.",
                                   dir=os.environ.get("KVFS_L2_TMP",
                                                      "/var/tmp")) \
            if l2 else None
        self.opts = list(opts if opts is not None else BASE_OPTS)
        if self.l2:
            self.opts.append("l2_dir=" + self.l2)
        else:
            self.opts = [o for o in self.opts
                         if not o.startswith(("l2_", "ingest", "flush_on"))]
        self.daemon = None
        self.log = None

    def mount(self):
        before = os.stat(self.mnt).st_dev
        # KVFS_TEST_VERBOSE=1: the daemon's log goes to stderr
        verbose = os.environ.get("KVFS_TEST_VERBOSE") == "1"
        if self.log:  # the previous daemon's (a remount)
            self.log.close()
        self.log = None if verbose else tempfile.TemporaryFile()
        self.daemon = subprocess.Popen(
            [MOUNT_BIN, "-d" if os.environ.get("KVFS_TEST_FUSE_DEBUG")
             else "-f", "-o", ",".join(self.opts), self.mnt],
            stderr=self.log, pass_fds=self.pass_fds)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.daemon.poll() is not None:
                raise RuntimeError("kvfs-mount exited with %d: %s" % (
                    self.daemon.returncode, self.daemon_log()))
            if os.stat(self.mnt).st_dev != before:
                return self.mnt
            time.sleep(0.01)
        raise RuntimeError("kvfs not mounted within 60 s")

    def daemon_log(self):
        if not self.log:
            return ""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def unmount(self):
        if _mounted(self.mnt):
            subprocess.call(["fusermount3", "-u", self.mnt],
                            stderr=subprocess.DEVNULL)
        rc = 0
        if self.daemon is not None:
            try:
                rc = self.daemon.wait(60)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                rc = self.daemon.wait()
            self.daemon = None
        if _mounted(self.mnt):  # never leave a dead mount behind
            subprocess.call(["umount", "-l", self.mnt],
                            stderr=subprocess.DEVNULL)
        if rc != 0:
            raise RuntimeError("kvfs-mount exited with %d: %s" % (
                rc, self.daemon_log()))

    def remount(self):
        self.unmount()
        return self.mount()

    def cleanup(self):
        try:
            self.unmount()
        finally:
            shutil.rmtree(self.mnt, ignore_errors=True)
            if self.l2:
                shutil.rmtree(self.l2, ignore_errors=True)
            if self.log:  # the daemon's log: no ResourceWarning
                self.log.close()
                self.log = None


_MOUNTS = []


def _cleanup_all():
    while _MOUNTS:
        try:
            _MOUNTS.pop().cleanup()
        except Exception as e:  # already reported by the test
            print("cleanup: %s" % e, file=sys.stderr)


def _on_signal(sig, frame):
    _cleanup_all()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def new_mount(opts=None, l2=True, pass_fds=()):
    if not _MOUNTS:
        atexit.register(_cleanup_all)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, _on_signal)
    m = Mount(opts, l2, pass_fds)
    _MOUNTS.append(m)
    m.mount()
    return m


def drop_mount(m):
    if m in _MOUNTS:
        _MOUNTS.remove(m)
    m.cleanup()


def aligned(nbytes):
    """A page-aligned, writable buffer (an anonymous mapping) and a numpy
    uint8 view of it, as an engine's pinned staging buffer is."""
    import numpy as np
    mm = mmap.mmap(-1, nbytes)
    return mm, np.frombuffer(mm, dtype=np.uint8)


def kv_block(seed, nbytes=BLOCK):
    """Deterministic KV-like bytes for one block: bf16 values of a normal
    distribution (compressible after the byte shuffle), so eviction to L2
    compresses and a wrong byte anywhere is detected."""
    import numpy as np
    rng = np.random.default_rng(seed)
    vals = rng.standard_normal(nbytes // 2, dtype=np.float32)
    return (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)


def put(path, data, mode=0o644):
    """Writes a file whole (created, or a new version by O_TRUNC)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def tier_of(path):
    try:
        return os.getxattr(path, "user.kvfs.tier").decode()
    except OSError:
        return None


def stats(mnt):
    import json
    with open(os.path.join(mnt, ".kvfs", "stats")) as f:
        return json.load(f)


def free_port():
    """A TCP port on loopback nobody listens on now (for a redis-server)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


NOBODY = 65534


def run_as(code, uid=NOBODY, timeout=60):
    """Runs `code` with this interpreter as user uid (group uid, no
    others), the repository's python/ on its path (kvfs importable);
    the CompletedProcess (text). For tests of what another user may do
    on a mount with allow_other."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    return subprocess.run([sys.executable, "-c", code], user=uid, group=uid,
                          extra_groups=[], env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_as_skip_reason(uid=NOBODY):
    """Why run_as cannot work here (not root, or the interpreter is not
    readable by uid), or None."""
    if os.geteuid() != 0:
        return "needs root (files of another user, allow_other)"
    r = run_as("import kvfs", uid)
    if r.returncode:
        return "%s cannot run %s as uid %d: %s" % (
            "this test", sys.executable, uid, r.stderr.strip()[-200:])
    return None
