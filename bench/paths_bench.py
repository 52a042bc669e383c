#!/usr/bin/python3
"""paths_bench - vLLM's file-system offloading tier on a kvfs path namespace
against tmpfs and against the local disk with O_DIRECT, in the same run (a
report, not a test).

usage: paths_bench.py [--blocks N] [--trials T] [--threads N] [--disk DIR]
                      [--shm DIR] [--mount-opts OPTS] [--requests | --calls]
                      [--preload LIB | --load-child]

It runs vLLM's own calls (vllm/v1/kv_offload/tiering/fs/io.py, as
tests/python/test_paths_vllm.py reproduces them): store_block = stat the
destination, makedirs, open(tmp, O_CREAT|O_EXCL|O_WRONLY|O_TRUNC[|O_DIRECT]),
one write of the 2 MiB block from a page-aligned buffer, close,
os.replace; load_block = open(O_RDONLY[|O_DIRECT]), readv into a
page-aligned buffer, close. O_DIRECT is used where vLLM's probe
(.o_direct_probe_<n>.tmp) says it works: kvfs and the disk; tmpfs refuses
it and runs buffered, as vLLM would. The blocks are compressible KV data
(bf16 of a normal distribution) laid out as vLLM lays them out
(<model>_<hash>_r0/<hhh>/<hh>_g0/<hash>.bin).

Phases, each over the same N blocks (default 128: 256 MiB), T trials
(default 3); in every trial the rounds alternate kvfs, tmpfs and the disk,
so noise from other work on the machine hits all three:
  store      N store_blocks into an empty tree
  load L1    N load_blocks, kvfs serving from its memory tier
  load L2, never read
             the blocks just stored (never read) after a warm restart of
             kvfs (every block only in its compressed L2 log on the same
             disk), as vLLM does it (each open promotes its block; what
             the mount does ahead of it is its own doing: no prefetch
             call), against the disk's own O_DIRECT loads
  load L2    the same after another restart, the blocks having been read
             in this order before (what readahead learned by reading)
  load L2, prefetch
             after one batched prefetch by path (kvfs_lookup_paths with
             KVFS_LOOKUP_PREFETCH), what an engine that announces the
             prompt's blocks would do
Every block read is compared with what was written. The report gives the
median and the range (min-max) of the trials and the ratio of medians, and
checks the targets of issue 26 on the medians (met/MISSED): store >= 1.0x
tmpfs, load L1 >= 0.85x tmpfs, load L2 after a restart with no prefetch
call >= 1.0x the disk.

--preload LIB runs every load phase in a child process (a "load worker":
this script re-run with --load-worker, given the paths, the O_DIRECT
choice and a file of the expected bytes; it times its own loop, so the
process start is not counted): kvfs's loads with LD_PRELOAD=LIB
(build/libkvfs_preload.so, lib/preload/: each open a KVFS_IOC_GET),
tmpfs's and the disk's without it, the same way; load L1 also times
kvfs's loads through a worker without the preload ("kvfs plain") and
through one with the preload and KVFS_PRELOAD_READS=lazy ("kvfs lazy":
the GET at the readv, straight into the caller's buffer), for the same
run's comparison. --load-child runs the loads so without any
preload (the plain counterpart of a --preload run).

--requests counts the FUSE requests of each system call instead (the
daemon's requests.* counters); --calls times each system call of
store_block and load_block on kvfs (memory tier) and tmpfs, alternating,
and prints the medians in microseconds with the daemon's CPU per block
(with --preload LIB: the same in a process run with LD_PRELOAD=LIB, where
kvfs's load_block is served by GETs; its stores and tmpfs's calls are
the library's pass-through).
"""
import argparse
import copy
import ctypes
import hashlib
import json
import mmap
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

try:
    import numpy as np
except ImportError:
    print("skip: numpy not importable by %s" % sys.executable)
    sys.exit(77)

import kvfs  # noqa: E402
import py_bench  # noqa: E402  (mount/umount; same directory)

BLOCK = 2 << 20
O_DIRECT = os.O_DIRECT
SUFFIX = "_%d.tmp" % random.randint(0, 2 ** 63 - 1)


def probe_o_direct(directory):
    path = os.path.join(directory, ".o_direct_probe" + SUFFIX)
    page = mmap.mmap(-1, mmap.PAGESIZE)
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | O_DIRECT,
                     0o644)
        try:
            os.write(fd, page)
        finally:
            os.close(fd)
        return True
    except OSError:
        return False
    finally:
        try:
            os.remove(path)
        except OSError:
            pass


def store_block(dest, view, direct):
    if os.path.exists(dest):
        return
    tmp = dest + SUFFIX
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC |
                 (O_DIRECT if direct else 0), 0o644)
    try:
        if os.write(fd, view) != len(view):
            raise OSError("short write")
    finally:
        os.close(fd)
    os.replace(tmp, dest)


def load_block(src, view, direct):
    fd = os.open(src, os.O_RDONLY | (O_DIRECT if direct else 0))
    try:
        if os.readv(fd, [view]) != len(view):
            raise OSError("short read")
    finally:
        os.close(fd)


MODEL = "llama_0a1b2c3d4e5f"


def rel_name(i, model=MODEL):
    h = hashlib.sha256(b"block %d" % i).hexdigest()
    return "%s_r0/%s/%s_g0/%s.bin" % (model, h[:3], h[3:5], h)


def kv_blocks(n):
    rng = np.random.default_rng(1)
    out = []
    for _ in range(n):
        v = rng.standard_normal(BLOCK // 2, dtype=np.float32)
        out.append((v.view(np.uint32) >> 16).astype(np.uint16)
                   .view(np.uint8))
    return out


def mount(binary, opts):
    return py_bench.mount(binary, opts, prefix="kvfs-pathsbench.",
                          quiet=True)


umount = py_bench.umount


class Target:
    def __init__(self, name, root):
        self.name, self.root = name, root
        self.model = MODEL
        os.makedirs(root, exist_ok=True)
        self.direct = probe_o_direct(root)

    def path(self, i):
        return os.path.join(self.root, rel_name(i, self.model))

    def clear(self):
        for e in os.listdir(self.root):
            p = os.path.join(self.root, e)
            if os.path.isdir(p):
                shutil.rmtree(p)
            else:
                os.remove(p)


def cpu_of(pid):
    """CPU seconds of this process, plus those of process pid if given."""
    t = os.times()
    c = t.user + t.system
    if pid:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read().rsplit(")", 1)[1].split()
        c += (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
    return c


def timed(fn, pid=None):
    """(wall seconds, CPU seconds of this process and of pid) of fn()."""
    c0 = cpu_of(pid)
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    return t1 - t0, cpu_of(pid) - c0


def each(n, threads, bufs, fn):
    """fn(i, array, view) for i in 0..n, on threads threads, thread k
    with its own buffer bufs[k] (what vLLM's I/O thread pool does)."""
    if threads == 1:
        for i in range(n):
            fn(i, *bufs[0])
        return
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda k: [fn(i, *bufs[k]) for i in
                               range(k, n, threads)], range(threads)))


def page_bufs(k):
    """k page-aligned 2 MiB buffers, each as (numpy array, memoryview)."""
    return [(lambda m: (np.frombuffer(m, dtype=np.uint8), memoryview(m)))(
        mmap.mmap(-1, BLOCK)) for _ in range(k)]


def load_worker():
    """--load-worker: load_block of each path of the JSON job on stdin
    (paths, direct, threads, ref: a file of the expected blocks end to
    end, pid: the daemon's or 0) into page-aligned buffers, each compared
    with its expected bytes; prints {"wall", "cpu"} of the loop (CPU of
    this process and of pid). Run by run_loads, with or without
    LD_PRELOAD."""
    job = json.load(sys.stdin)
    paths = job["paths"]
    # read in and buffers touched before the clock starts: no page
    # faults of the worker's own in the timed loop (the in-process loads
    # have none either)
    want = np.fromfile(job["ref"], dtype=np.uint8)
    bufs = page_bufs(job["threads"])
    for b, _ in bufs:
        b[:] = 0

    def one(i, b, v):
        load_block(paths[i], v, job["direct"])
        if not np.array_equal(b, want[i * BLOCK:(i + 1) * BLOCK]):
            raise SystemExit("%s: block %d differs" % (paths[i], i))
    wall, cpu = timed(lambda: each(len(paths), job["threads"], bufs, one),
                      job["pid"])
    print(json.dumps({"wall": wall, "cpu": cpu}))
    return 0


def run_loads(t, n, threads, ref, pid, preload, lazy=False):
    """(wall, CPU) seconds of target t's n loads in a load worker (a new
    process: this script with --load-worker), with LD_PRELOAD=preload if
    given, else with no LD_PRELOAD at all; lazy: with
    KVFS_PRELOAD_READS=lazy too."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    if lazy:
        env["KVFS_PRELOAD_READS"] = "lazy"
    job = {"paths": [t.path(i) for i in range(n)], "direct": t.direct,
           "threads": threads, "ref": ref, "pid": pid or 0}
    r = subprocess.run([sys.executable, os.path.abspath(__file__),
                        "--load-worker"], input=json.dumps(job), env=env,
                       stdout=subprocess.PIPE, universal_newlines=True)
    if r.returncode:
        raise SystemExit("%s: load worker exited with %d" % (t.name,
                                                            r.returncode))
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["wall"], out["cpu"]


def gbs(n, s):
    return n * BLOCK / s / 1e9


PRELOADED = "KVFS_PATHS_BENCH_PRELOADED"


def main():
    if sys.argv[1:] == ["--load-worker"]:
        return load_worker()
    # --calls --preload: this process re-run with LD_PRELOAD; the
    # library is loaded now, and the daemon it starts must not have it
    preloaded = os.environ.pop(PRELOADED, None)
    if preloaded:
        os.environ.pop("LD_PRELOAD", None)
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=128)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--disk", default=os.environ.get("KVFS_BENCH_DISK",
                                                     "/var/tmp"))
    ap.add_argument("--shm", default="/dev/shm")
    ap.add_argument("--threads", type=int, default=1,
                    help="load and store with this many threads, as vLLM's "
                    "tier does with its I/O thread pool (each thread its "
                    "own page-aligned buffer)")
    ap.add_argument("--mount-bin", default=os.environ.get(
        "KVFS_MOUNT_BIN", os.path.join(REPO, "build", "kvfs-mount")))
    ap.add_argument("--requests", action="store_true",
                    help="count the FUSE requests of each system call of "
                    "store_block and load_block instead (the daemon's "
                    "requests.* counters; 16 blocks)")
    ap.add_argument("--mount-opts", default="",
                    help="more kvfs-mount options, comma-separated, after "
                    "the bench's own (e.g. compress=none)")
    ap.add_argument("--calls", action="store_true",
                    help="time each system call of store_block and "
                    "load_block on kvfs and tmpfs instead (medians, us); "
                    "with --preload, all in one preloaded process")
    ap.add_argument("--preload", metavar="LIB",
                    help="run the load phases in child processes, kvfs's "
                    "with LD_PRELOAD=LIB (e.g. build/libkvfs_preload.so), "
                    "tmpfs's and the disk's without")
    ap.add_argument("--load-child", action="store_true",
                    help="run the load phases in child processes without "
                    "any LD_PRELOAD (what --preload is compared with)")
    a = ap.parse_args()
    n = a.blocks
    if not os.access(a.mount_bin, os.X_OK):
        print("skip: no kvfs-mount at %s" % a.mount_bin)
        return 77
    if a.preload:
        a.preload = os.path.abspath(a.preload)
        if not os.access(a.preload, os.R_OK):
            print("skip: no preload library at %s" % a.preload)
            return 77
        if a.calls:
            # every call in one preloaded process, kvfs's and tmpfs's
            argv, drop = [], False
            for x in sys.argv[1:]:
                if not drop and not x.startswith("--preload"):
                    argv.append(x)
                drop = x == "--preload"
            env = dict(os.environ, LD_PRELOAD=a.preload)
            env[PRELOADED] = a.preload
            sys.stdout.flush()
            os.execve(sys.executable, [sys.executable, os.path.abspath(
                __file__)] + argv, env)
    if preloaded:
        print("every call with LD_PRELOAD=%s" % preloaded)
    child = bool(a.preload) or a.load_child
    work_disk = tempfile.mkdtemp(prefix="kvfs-pathsbench.", dir=a.disk)
    work_shm = tempfile.mkdtemp(prefix="kvfs-pathsbench.", dir=a.shm)
    l2 = os.path.join(work_disk, "l2")
    os.mkdir(l2)
    want = kv_blocks(n)
    mm = mmap.mmap(-1, BLOCK)
    buf = np.frombuffer(mm, dtype=np.uint8)
    view = memoryview(mm)
    l1 = max(64 << 20, (n * BLOCK * 3) // 2)
    opts = ["names=paths", "l1_size=%d" % l1, "max_chunk=4M",
            "l2_dir=" + l2, "l2_size=%d" % max(1 << 30, 3 * n * BLOCK),
            "flush_on_exit=1"] + [o for o in a.mount_opts.split(",") if o]
    mnt, daemon = mount(a.mount_bin, opts)
    if a.requests or a.calls:
        try:
            if a.calls:
                return time_calls(mnt, daemon, work_shm, want, view, buf,
                                  a.trials)
            return count_requests(a.mount_bin, opts, mnt, daemon, want,
                                  view, buf)
        finally:
            shutil.rmtree(work_disk, ignore_errors=True)
            shutil.rmtree(work_shm, ignore_errors=True)
    try:
        os.mkdir(os.path.join(mnt, "vllm"))
        kv = Target("kvfs", os.path.join(mnt, "vllm"))
        shm = Target("tmpfs", os.path.join(work_shm, "vllm"))
        disk = Target("disk", os.path.join(work_disk, "vllm"))
        kv_plain = kv_lazy = None
        if a.preload:
            # the same files, loaded through a worker without the preload,
            # and through one with it reading lazily
            kv_plain = copy.copy(kv)
            kv_plain.name = "kvfs plain"
            kv_lazy = copy.copy(kv)
            kv_lazy.name = "kvfs lazy"
        res = {}
        ref = None
        if child:
            # the expected blocks, end to end, for the load workers
            ref = os.path.join(work_shm, "want")
            with open(ref, "wb") as f:
                for w in want:
                    f.write(w.tobytes())

        def opens():
            """(GETs, FUSE opens) the daemon has counted."""
            with open(os.path.join(mnt, ".kvfs", "stats")) as f:
                v = json.load(f)
            return v["ioctl"]["xfer"]["gets"], v["requests"]["open"]

        def add(phase, t, fn, before=None):
            pid = daemon.pid if t in (kv, kv_plain, kv_lazy) else None
            o0 = opens()
            if fn is loads and child:
                wall, cpu = timed(before, pid) if before else (0, 0)
                w, c = run_loads(t, n, a.threads, ref, pid,
                                 a.preload if t in (kv, kv_lazy) else None,
                                 t is kv_lazy)
                wall, cpu = wall + w, cpu + c
            else:
                wall, cpu = timed(lambda: (before and before(), fn(t)),
                                  pid)
            if pid and fn is loads:
                # how the kvfs loads were served: GETs, FUSE opens
                o1 = opens()
                res.setdefault(("opens", t.name), []).append(
                    (phase, o1[0] - o0[0], o1[1] - o0[1]))
            res.setdefault((phase, t.name), []).append(gbs(n, wall))
            # CPU times come in clock ticks: at least one
            tick = 1.0 / os.sysconf("SC_CLK_TCK")
            res.setdefault((phase, t.name, "cpu"), []).append(
                gbs(n, max(cpu, tick)))
            if t is kv and phase.startswith("load L2"):
                # each L2 phase follows a remount: the counts are its own
                with open(os.path.join(mnt, ".kvfs", "stats")) as f:
                    ra = json.load(f)["readahead"]
                res.setdefault((phase, "ra"), []).append(
                    (ra["promotions"], ra["hits"]))

        bufs = [(buf, view)] + page_bufs(a.threads - 1)

        def stores(t):
            def one(i, b, v):
                b[:] = want[i]
                store_block(t.path(i), v, t.direct)
            each(n, a.threads, bufs, one)

        def loads(t):
            def one(i, b, v):
                load_block(t.path(i), v, t.direct)
                if not np.array_equal(b, want[i]):
                    raise SystemExit("%s: block %d differs" % (t.name, i))
            each(n, a.threads, bufs, one)

        def restart():
            nonlocal mnt, daemon
            umount(mnt, daemon)
            mnt, daemon = mount(a.mount_bin, opts)
            kv.root = os.path.join(mnt, "vllm")

        for trial in range(a.trials):
            for t in (kv, shm, disk):
                t.clear()
            for t in (kv, shm, disk):
                add("store", t, stores)
            # kvfs preloaded, plain and lazy take turns at going first
            # (the first follows the stores more closely: L2 write-back)
            kvs = [kv, kv_plain, kv_lazy]
            kvs = kvs[trial % 3:] + kvs[:trial % 3]
            for t in kvs + [shm, disk]:
                if t:
                    add("load L1", t, loads)
        for trial in range(a.trials):
            # blocks stored and never read, under new names each trial:
            # no order learned by reading
            kv.clear()
            kv.model = "%s%d" % (MODEL[:-1], trial)
            stores(kv)
            restart()
            add("load L2, never read", kv, loads)
            add("load L2, never read", disk, loads)
            # the same blocks, read once in this order before
            restart()
            add("load L2", kv, loads)
            add("load L2", disk, loads)
            restart()
            add("load L2, prefetch", kv, loads, lambda: prefetch(kv, n))
            add("load L2, prefetch", disk, loads)
        with open(os.path.join(mnt, ".kvfs", "stats")) as f:
            st = json.load(f)
        if a.mount_opts:
            print("kvfs mounted with %s added" % a.mount_opts)
        if child:
            print("loads in child processes (load workers); kvfs's %s" % (
                "with LD_PRELOAD=" + a.preload if a.preload else
                "without a preload"))
        report(res, n, a.trials, a.threads, kv, shm, disk, st)
    finally:
        umount(mnt, daemon)
        shutil.rmtree(work_disk, ignore_errors=True)
        shutil.rmtree(work_shm, ignore_errors=True)
    return 0


def count_requests(binary, opts, mnt, daemon, want, view, buf):
    """Prints the FUSE requests of each system call of store_block and
    load_block (per block, less those of reading the stats): 16 blocks
    stored, loaded at once, loaded again 1.5 s later (past FS_TTL),
    and loaded after a restart. Unmounts."""
    counts = {}

    def reqs():
        with open(os.path.join(mnt, ".kvfs", "stats")) as f:
            return json.load(f)["requests"]

    def step(name, fn):
        a = reqs()
        b = reqs()
        r = fn()
        c = reqs()
        acc = counts.setdefault(name, {})
        for k in c:
            d = (c[k] - b[k]) - (b[k] - a[k])
            if d:
                acc[k] = acc.get(k, 0) + d
        return r

    def store(dest):
        step("store: exists", lambda: os.path.exists(dest))
        step("store: makedirs", lambda: os.makedirs(os.path.dirname(dest),
                                                    exist_ok=True))
        tmp = dest + SUFFIX
        fd = step("store: open", lambda: os.open(
            tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC |
            O_DIRECT, 0o644))
        step("store: write", lambda: os.write(fd, view))
        step("store: close", lambda: os.close(fd))
        step("store: replace", lambda: os.replace(tmp, dest))

    def load(src, tag):
        fd = step(tag + ": open", lambda: os.open(src, os.O_RDONLY |
                                                  O_DIRECT))
        step(tag + ": readv", lambda: os.readv(fd, [view]))
        step(tag + ": close", lambda: os.close(fd))

    n = 16
    os.mkdir(os.path.join(mnt, "vllm"))
    t = Target("kvfs", os.path.join(mnt, "vllm"))
    try:
        for i in range(n):
            buf[:] = want[i % len(want)]
            store(t.path(i))
        for i in range(n):
            load(t.path(i), "load at once")
        time.sleep(1.5)
        for i in range(n):
            load(t.path(i), "load 1.5 s later")
        umount(mnt, daemon)
        mnt, daemon = mount(binary, opts)
        t.root = os.path.join(mnt, "vllm")
        for i in range(n):
            load(t.path(i), "load after restart")
    finally:
        umount(mnt, daemon)
    print("FUSE requests per block (MKDIR, RENAME not counted by "
          "requests.*):")
    for name, acc in counts.items():
        print("  %-30s %s" % (name, " ".join(
            "%s %.2f" % (k, v / n) for k, v in sorted(acc.items()))))
    return 0


def close_fds_below(d):
    """Closes this process's descriptors of files below directory d: the
    preload library keeps each namespace it served open (the mount would
    be busy); it forgets a descriptor closed behind its back."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target == d or target.startswith(d + "/"):
            os.close(int(fd))


def time_calls(mnt, daemon, work_shm, want, view, buf, trials):
    """Prints the median wall time of each system call of store_block and
    load_block (us), kvfs's memory tier against tmpfs, the two alternating
    in each of trials rounds of len(want) blocks, and the daemon's CPU per
    block (us, clock ticks: coarse). Unmounts."""
    pc = time.perf_counter
    res = {}

    def timed_call(t, name, fn):
        t0 = pc()
        r = fn()
        res.setdefault((t.name, name), []).append((pc() - t0) * 1e6)
        return r

    def store(t, i):
        dest = t.path(i)
        tmp = dest + SUFFIX
        buf[:] = want[i]
        timed_call(t, "store: exists", lambda: os.path.exists(dest))
        timed_call(t, "store: makedirs", lambda: os.makedirs(
            os.path.dirname(dest), exist_ok=True))
        fd = timed_call(t, "store: open", lambda: os.open(
            tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC |
            (O_DIRECT if t.direct else 0), 0o644))
        timed_call(t, "store: write", lambda: os.write(fd, view))
        timed_call(t, "store: close", lambda: os.close(fd))
        timed_call(t, "store: replace", lambda: os.replace(tmp, dest))

    def load(t, i):
        fd = timed_call(t, "load: open", lambda: os.open(
            t.path(i), os.O_RDONLY | (O_DIRECT if t.direct else 0)))
        timed_call(t, "load: readv", lambda: os.readv(fd, [view]))
        timed_call(t, "load: close", lambda: os.close(fd))

    os.mkdir(os.path.join(mnt, "vllm"))
    kv = Target("kvfs", os.path.join(mnt, "vllm"))
    shm = Target("tmpfs", os.path.join(work_shm, "vllm"))
    n = len(want)
    try:
        for _ in range(trials):
            for phase in (store, load):
                for t in (kv, shm):
                    if phase is store:
                        t.clear()
                    c0 = cpu_of(daemon.pid) - cpu_of(None)
                    for i in range(n):
                        phase(t, i)
                    if t is kv:
                        res.setdefault(("kvfs", "daemon CPU/block, " +
                                        phase.__name__), []).append(
                            (cpu_of(daemon.pid) - cpu_of(None) - c0) /
                            n * 1e6)
    finally:
        close_fds_below(mnt)
        umount(mnt, daemon)
    med = statistics.median
    print("us per system call (median of %d x %d), load average %.2f" % (
        trials, n, os.getloadavg()[0]))
    print("%-32s %9s %9s" % ("call", "kvfs", "tmpfs"))
    for (tname, name), v in res.items():
        if tname == "kvfs":
            w = res.get(("tmpfs", name))
            print("%-32s %9.1f %9s" % (name, med(v), "%.1f" % med(w)
                                         if w else "-"))
    return 0


def prefetch(t, n):
    fd = os.open(t.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        lib = kvfs.load_library()
        lib.kvfs_lookup_paths.restype = ctypes.c_long
        paths = (ctypes.c_char_p * n)(*[rel_name(i, t.model).encode()
                                         for i in range(n)])
        got = lib.kvfs_lookup_paths(fd, paths, ctypes.c_size_t(n),
                                    ctypes.c_uint32(0),
                                    ctypes.c_uint(kvfs.LOOKUP_PREFETCH),
                                    ctypes.c_uint32(0), None)
        if got != n:
            raise SystemExit("prefetch by path found %d of %d" % (got, n))
    finally:
        os.close(fd)


PHASES = (("store", "tmpfs", 1.0), ("load L1", "tmpfs", 0.85),
          ("load L2, never read", "disk", 1.0), ("load L2", "disk", 1.0),
          ("load L2, prefetch", "disk", None))


def report(res, n, trials, threads, kv, shm, disk, st):
    print("vLLM store_block/load_block, %d blocks of 2 MiB, %d trials, %d "
          "thread(s); O_DIRECT: kvfs %s, tmpfs %s, disk %s; load average "
          "%.2f" % (n, trials, threads, kv.direct, shm.direct, disk.direct,
                    os.getloadavg()[0]))
    print("%-20s %-10s %7s %13s %7s %7s  %-11s %s" % (
        "phase", "target", "median", "range", "best", "GB/cpu",
        "median vs", "GB/cpu vs"))
    med = statistics.median
    targets = []
    for phase, base, want in PHASES:
        b = res.get((phase, base))
        bc = res.get((phase, base, "cpu"))
        for tname in ("kvfs", "kvfs plain", "kvfs lazy", "tmpfs", "disk"):
            v = res.get((phase, tname))
            if not v:
                continue
            vc = res[(phase, tname, "cpu")]
            vs = vsc = ""
            if b and tname != base:
                vs = "%.2fx %s" % (med(v) / med(b), base)
                vsc = "%.2fx" % (med(vc) / med(bc))
            print("%-20s %-10s %7.2f %6.2f-%-6.2f %7.2f %7.2f  %-11s %s" % (
                phase, tname, med(v), min(v), max(v), max(v), med(vc), vs,
                vsc))
        for tname in ("kvfs", "kvfs lazy"):
            v = res.get((phase, tname))
            if want and v and b:
                targets.append((phase if tname == "kvfs" else
                                phase + " (lazy)", base, med(v) / med(b),
                                want))
    print("GB/s of raw block bytes (wall time); GB/cpu: GB per CPU-second "
          "(this process, and kvfs's daemon for kvfs)")
    print("kvfs L2: %.2f compression ratio; readahead promoted / read, each"
          " trial: %s" % (st["l2"]["compression_ratio"], "; ".join(
              "%s %s" % (p, " ".join("%d/%d" % x for x in res[(p, "ra")]))
              for p, _, _ in PHASES if (p, "ra") in res)))
    for tname in ("kvfs", "kvfs plain", "kvfs lazy"):
        if ("opens", tname) in res:
            seen = {}
            for phase, g, o in res[("opens", tname)]:
                seen.setdefault(phase, []).append("%d/%d" % (g, o))
            print("%s's %d loads, GETs/FUSE opens, each trial: %s" % (
                tname, n, "; ".join("%s %s" % (p, " ".join(v))
                                   for p, v in seen.items())))
    print("\ntargets (issue 26; medians of kvfs against the same run's):")
    for phase, base, r, want in targets:
        print("  %-20s %5.2fx %-5s (>= %.2fx): %s" % (
            phase, r, base, want, "met" if r >= want else "MISSED"))


if __name__ == "__main__":
    sys.exit(main())
