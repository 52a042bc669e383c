#!/usr/bin/python3
"""What an fsync costs a writer (issue 26 review r6): time of open, write
of a 2 MiB KV-like chunk (bf16 values: zstd-compressible after the
shuffle), [fsync,] close, per chunk, with and without the fsync, in
alternating rounds on one mount (plain build, l2_dir under /var/tmp,
ingest=evicted, so without fsync nothing is written to L2 at all). Also
an fsync through a reader's fd of a chunk published without one.

    /usr/bin/python3 bench/fsync_cost.py [rounds] [chunks per round] \
        [extra,mount,options]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "python"))
os.environ.setdefault("KVFS_MOUNT_BIN", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "build", "kvfs-mount"))
import pathmount  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
N = int(sys.argv[2]) if len(sys.argv) > 2 else 16
EXTRA = sys.argv[3].split(",") if len(sys.argv) > 3 else []


def main():
    pathmount.need("daemon")
    m = pathmount.new_mount(["l1_size=512M", "max_chunk=4M",
                             "l2_size=2G", "ingest=evicted"] + EXTRA,
                            l2=True)
    blocks = [pathmount.kv_block(i).tobytes() for i in range(N)]
    res = {"no fsync": [], "fsync": [], "reader fsync": []}
    seq = 0
    try:
        ns = os.path.join(m.mnt, "kk")
        os.mkdir(ns)
        for r in range(ROUNDS):
            for mode in (("fsync", "no fsync") if r % 2 else
                         ("no fsync", "fsync")):
                for b in blocks:
                    seq += 1
                    p = os.path.join(ns, "%032x" % seq)
                    t0 = time.perf_counter()
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                    os.write(fd, b)
                    if mode == "fsync":
                        os.fsync(fd)
                    os.close(fd)
                    res[mode].append(time.perf_counter() - t0)
                    if mode == "no fsync" and r == ROUNDS - 1:
                        t0 = time.perf_counter()
                        fd = os.open(p, os.O_RDONLY)
                        os.fsync(fd)
                        os.close(fd)
                        res["reader fsync"].append(time.perf_counter() - t0)
        st = pathmount.stats(m.mnt)["l2"]
    finally:
        pathmount.drop_mount(m)
    print("%d rounds x %d chunks of 2 MiB, alternating %s" % (
        ROUNDS, N, ",".join(EXTRA)))
    for k, v in res.items():
        v = sorted(v)
        print("%-13s n=%3d  median %6.2f ms  p90 %6.2f ms  mean %6.2f ms" % (
            k, len(v), 1e3 * statistics.median(v),
            1e3 * v[int(len(v) * 0.9)], 1e3 * statistics.mean(v)))
    print("l2.syncs %d, l2.sync_writes %d, l2.writes %d" % (
        st["syncs"], st["sync_writes"], st["writes"]))


if __name__ == "__main__":
    main()
