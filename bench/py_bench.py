#!/usr/bin/python3
"""py_bench - the Python binding's put/get throughput on kvfs against plain
os.write/os.read of the same chunks on tmpfs, in the same run (a report,
not a test).

usage: py_bench.py [--mount-bin BIN] [--chunk BYTES] [--count N]
                   [--repeat R] [--busy] [MOUNTPOINT]
With MOUNTPOINT it uses that kvfs mount; otherwise it mounts one on a
temporary directory (BIN, default $KVFS_MOUNT_BIN or build/kvfs-mount) and
unmounts it at the end. tmpfs is /dev/shm. libkvfs.so is found as
the kvfs package finds it ($KVFS_LIB, build/). --busy: a process spins
for the whole run (issue 26 measures the batched GET with the other core
busy, as an engine's own work keeps it). Prints issue 26's target for the
binding's batched GET (get_many of 2 MiB chunks, 16 per call, >= 1.5x
tmpfs readv into the same buffers) met or MISSED, per kind of buffer.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
import kvfs  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None


def mount(binary, opts, prefix="kvfs-pybench.", quiet=False):
    """Mounts kvfs (foreground daemon) with the -o options in opts on a new
    temporary directory; returns (directory, daemon). Also used by
    paths_bench.py."""
    d = tempfile.mkdtemp(prefix=prefix)
    before = os.stat(d).st_dev
    p = subprocess.Popen([binary, "-f", "-o", ",".join(opts), d],
                         stderr=subprocess.DEVNULL if quiet else None)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if p.poll() is not None:
            raise SystemExit("kvfs-mount exited with %d" % p.returncode)
        if os.stat(d).st_dev != before:
            return d, p
        time.sleep(0.01)
    p.kill()
    raise SystemExit("mount timed out")


def umount(d, p):
    subprocess.call(["fusermount3", "-u", d])
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    os.rmdir(d)


def drain(it):
    """Runs a generator, keeping no result alive (a list of 2 MiB results
    would measure page faults of fresh memory, not the I/O)."""
    for _ in it:
        pass


def best(fn, repeat):
    """Best of repeat runs of fn(i) (i = run index), in seconds."""
    t = []
    for i in range(repeat):
        t0 = time.perf_counter()
        fn(i)
        t.append(time.perf_counter() - t0)
    return min(t)


def plain_write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    mv = memoryview(data)
    done = 0
    while done < len(mv):
        done += os.write(fd, mv[done:])
    os.close(fd)


def plain_read(path, size):
    fd = os.open(path, os.O_RDONLY)
    chunks = []
    n = 0
    while n < size:
        b = os.read(fd, size - n)
        if not b:
            break
        chunks.append(b)
        n += len(b)
    os.close(fd)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def plain_readinto(path, buf):
    fd = os.open(path, os.O_RDONLY)
    mv = memoryview(buf)
    n = 0
    while n < len(mv):
        k = os.readv(fd, [mv[n:]])
        if not k:
            break
        n += k
    os.close(fd)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mountpoint", nargs="?")
    ap.add_argument("--mount-bin", default=os.environ.get(
        "KVFS_MOUNT_BIN", os.path.join(REPO, "build", "kvfs-mount")))
    ap.add_argument("--chunk", type=int, default=2 << 20)
    ap.add_argument("--count", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--busy", action="store_true")
    a = ap.parse_args()
    spin = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) \
        if a.busy else None
    try:
        run(a)
    finally:
        if spin:
            spin.kill()
            spin.wait()


def run(a):
    total = a.chunk * a.count
    owned = None
    mnt = a.mountpoint
    if not mnt:
        # Every repeat writes new keys: room for all of them.
        mnt, proc = mount(a.mount_bin, ["l1_size=%d" % (
            total * (4 * a.repeat + 1) + (64 << 20))])
        owned = (mnt, proc)
    shm = tempfile.mkdtemp(prefix="kvfs-pybench.", dir="/dev/shm")
    conn = None
    try:
        data = os.urandom(a.chunk)
        conn = kvfs.Connector(mnt, "pybench.%d" % os.getpid(),
                              chunk_tokens=16)
        keysets = [kvfs.keys(range(a.count * 16), 16, seed=r + 1)
                   for r in range(a.repeat)]
        rows = []

        # put: binding on kvfs vs os.write on tmpfs
        n = a.count
        nsdir = os.path.join(mnt, conn.namespace)
        keys2 = [kvfs.keys(range(n * 16), 16, seed=1000 + r)
                 for r in range(a.repeat)]

        def shm_path(r, i):
            return os.path.join(shm, "%d.%d" % (r, i))

        t = best(lambda r: drain(conn.put(k, data) for k in keysets[r]),
                 a.repeat)
        rows.append(("put  kvfs.Connector.put (kvfs)", t))
        t = best(lambda r: drain(plain_write(shm_path(r, i), data)
                                 for i in range(n)), a.repeat)
        rows.append(("put  os.write (tmpfs)", t))
        t = best(lambda r: drain(
            plain_write(os.path.join(nsdir, kvfs.key_hex(k)), data)
            for k in keys2[r]), a.repeat)
        rows.append(("put  os.write on the key, no rename (kvfs)", t))

        # get: into a caller's buffer (readinto), or returning new bytes
        out = bytearray(a.chunk)
        t = best(lambda r: drain(conn.get(k, out) for k in keysets[0]),
                 a.repeat)
        rows.append(("get  kvfs.Connector.get(key, out) (kvfs)", t))
        t = best(lambda r: drain(conn.get(k) for k in keysets[0]), a.repeat)
        rows.append(("get  kvfs.Connector.get(key) -> bytes (kvfs)", t))
        t = best(lambda r: drain(plain_read(shm_path(0, i), a.chunk)
                                 for i in range(n)), a.repeat)
        rows.append(("get  os.read -> bytes (tmpfs)", t))
        t = best(lambda r: drain(plain_readinto(shm_path(0, i), out)
                                 for i in range(n)), a.repeat)
        rows.append(("get  os.readv into a buffer (tmpfs)", t))
        if np is not None:
            arr = np.empty(a.chunk, dtype=np.uint8)
            t = best(lambda r: drain(conn.get(k, arr) for k in keysets[0]),
                     a.repeat)
            rows.append(("get  kvfs.Connector.get(key, ndarray) (kvfs)", t))
        t = best(lambda r: drain(bytes(conn.get_mmap(k)[:])
                                 for k in keysets[0]), a.repeat)
        rows.append(("get  kvfs.Connector.get_mmap + copy (kvfs)", t))

        # batched: put_many / get_many, 16 chunks per call (the daemon
        # copies straight from/into these buffers)
        b = 16
        keys3 = [kvfs.keys(range(n * 16), 16, seed=2000 + r)
                 for r in range(a.repeat)]
        t = best(lambda r: drain(conn.put_many(keys3[r][i:i + b],
                                               [data] * len(
                                                   keys3[r][i:i + b]))
                                 for i in range(0, n, b)), a.repeat)
        rows.append(("put  Connector.put_many, 16 per call (kvfs)", t))
        outs = [bytearray(a.chunk) for _ in range(b)]
        t = best(lambda r: drain(plain_readinto(shm_path(0, i), outs[i % b])
                                 for i in range(n)), a.repeat)
        rows.append(("get  os.readv into 16 buffers in turn (tmpfs)", t))
        t = best(lambda r: drain(conn.get_many(keysets[0][i:i + b],
                                               outs[:len(
                                                   keysets[0][i:i + b])])
                                 for i in range(0, n, b)), a.repeat)
        rows.append(("get  Connector.get_many, 16 per call (kvfs)", t))
        if np is not None:
            arrs = [np.empty(a.chunk, dtype=np.uint8) for _ in range(b)]
            t = best(lambda r: drain(conn.get_many(
                keysets[0][i:i + b], arrs[:len(keysets[0][i:i + b])])
                for i in range(0, n, b)), a.repeat)
            rows.append(("get  Connector.get_many into ndarrays (kvfs)", t))
        # the same into kvfs.buffer()s (huge pages: the daemon's copy pins
        # one page per 2 MiB), and tmpfs's readv into those same buffers
        hbufs = [kvfs.buffer(a.chunk) for _ in range(b)]
        t = best(lambda r: drain(plain_readinto(shm_path(0, i),
                                                hbufs[i % b])
                                 for i in range(n)), a.repeat)
        rows.append(("get  os.readv into 16 kvfs.buffer()s (tmpfs)", t))
        t = best(lambda r: drain(conn.get_many(
            keysets[0][i:i + b], hbufs[:len(keysets[0][i:i + b])])
            for i in range(0, n, b)), a.repeat)
        rows.append(("get  Connector.get_many into kvfs.buffer()s (kvfs)",
                     t))
        hsrc = kvfs.buffer(a.chunk)
        hsrc[:] = data
        keys4 = [kvfs.keys(range(n * 16), 16, seed=3000 + r)
                 for r in range(a.repeat)]
        t = best(lambda r: drain(conn.put_many(keys4[r][i:i + b],
                                               [hsrc] * len(
                                                   keys4[r][i:i + b]))
                                 for i in range(0, n, b)), a.repeat)
        rows.append(("put  Connector.put_many from a kvfs.buffer() (kvfs)",
                     t))
        conn.close()

        print("py_bench: %d chunks of %d KiB (%.0f MiB), best of %d" % (
            a.count, a.chunk >> 10, total / 2 ** 20, a.repeat))
        d = dict(rows)
        ref = {"put": d["put  os.write (tmpfs)"],
               "get": d["get  os.readv into a buffer (tmpfs)"],
               "byt": d["get  os.read -> bytes (tmpfs)"],
               "b16": d["get  os.readv into 16 buffers in turn (tmpfs)"],
               "h16": d["get  os.readv into 16 kvfs.buffer()s (tmpfs)"]}
        for name, t in rows:
            kind = "byt" if ("bytes" in name or "mmap" in name) else name[:3]
            if name.startswith("get") and ("16" in name or "ndarrays" in name):
                kind = "b16"  # the same 16 destination buffers
            if name.startswith("get") and "kvfs.buffer" in name:
                kind = "h16"  # the same 16 huge-page buffers
            gbs = total / t / 1e9
            print("  %-52s %7.2f GB/s   %.2fx tmpfs" % (
                name, gbs, ref[kind] / t))
        print("  (get rows compare with the tmpfs row of the same kind: "
              "into a caller's buffer, into 16 buffers in turn (get_many),"
              " into 16 kvfs.buffer()s, or returning new bytes)")
        if a.chunk == 2 << 20:
            print("targets (issue 26: batched GET of 2 MiB, 16 per call, "
                  ">= 1.5x tmpfs readv into the same buffers%s):" % (
                      "; the other core busy" if a.busy else ""))
            for name, kind in (
                    ("get  Connector.get_many, 16 per call (kvfs)", "b16"),
                    ("get  Connector.get_many into ndarrays (kvfs)", "b16"),
                    ("get  Connector.get_many into kvfs.buffer()s (kvfs)",
                     "h16")):
                if name in d:
                    x = ref[kind] / d[name]
                    print("  %-52s %.2fx: %s" % (name[5:], x,
                                                 "met" if x >= 1.5
                                                 else "MISSED"))
    finally:
        if conn is not None:
            conn.close()
        shutil.rmtree(shm, ignore_errors=True)
        if owned:
            umount(*owned)


if __name__ == "__main__":
    main()
