#!/usr/bin/env python3
"""preload_ab.py - two builds of the preload path against each other
(daemon and libkvfs_preload.so of each), with the plain path of each and
tmpfs, in alternating rounds: wall time, files/s, and CPU per file of the
reader (its rusage) and of the daemon (schedstat of its threads), which
the machine's load moves less than wall time.

  SZ=262144 N=512 R=9 /usr/bin/python3 bench/preload_ab.py BASE/build NEW/build

BASE and NEW are build folders holding kvfs-mount and libkvfs_preload.so;
the reader and writer are NEW/bench/kvfs_pbench (--reader / --writer), so
only the daemon and the library differ. Both builds are mounted at once
(l1_size=1G); each holds N chunks of SZ bytes, and so does a directory on
/dev/shm. Each of R rounds reads every chunk once in each mode (preloaded
and plain, each build, and tmpfs), in an order that rotates every round,
then writes N new chunks in each mode (and with the new build's
KVFS_PRELOAD_WRITES=lazy) into a fresh directory (removed, untimed, after
the round). Prints per mode the median and range of files/s, the
median reader and daemon CPU per file, the ratio to tmpfs, issue 26's
targets met or MISSED, and the load average before and after. Run as
root (mounts).
"""
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_cpu import cpu_s, daemon_pid  # noqa: E402

SZ = int(os.environ.get("SZ", "262144"))
N = int(os.environ.get("N", "512"))
R = int(os.environ.get("R", "9"))


def chunk(i):
    """What kvfs_pbench --reader checks: the stamp i + 1 at both ends."""
    b = bytearray(os.urandom(SZ))
    b[:8] = struct.pack("<Q", i + 1)
    b[-1] = (i + 1) & 0xFF
    return bytes(b)


def child(cmd, env):
    """Runs cmd; its seconds (its own line) and CPU seconds (rusage)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit("%s: exit %d" % (" ".join(cmd), p.returncode))
    return float(out.split()[-1]), ru.ru_utime + ru.ru_stime


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    builds = {"base": sys.argv[1], "new": sys.argv[2]}
    bench = os.path.join(builds["new"], "bench/kvfs_pbench")
    mnt = {}
    shm = tempfile.mkdtemp(prefix="/dev/shm/preload_ab.")
    try:
        for b, d in builds.items():
            mnt[b] = tempfile.mkdtemp(prefix="/tmp/preload_ab.")
            subprocess.run([os.path.join(d, "kvfs-mount"), "-o", "l1_size=1G",
                            mnt[b]], check=True)
            os.mkdir(mnt[b] + "/ns")
        os.mkdir(shm + "/ns")
        for i in range(N):
            data = chunk(i)
            for d in list(mnt.values()) + [shm]:
                with open(d + "/ns/%032x" % (i + 1), "wb") as f:
                    f.write(data)
        time.sleep(0.5)
        # after the writes: by then the daemon has more threads than
        # its watchdog, which names the mount too
        pid = {b: daemon_pid(mnt[b]) for b in builds}
        modes = []  # (name, directory, env, daemon pid)
        for b in builds:
            pre = dict(os.environ,
                       LD_PRELOAD=os.path.join(builds[b], "libkvfs_preload.so"))
            modes.append(("%s preload" % b, mnt[b], pre, pid[b]))
        # writes only: the open's LOOKUP dropped (reads are the same)
        modes.append(("new lazy", mnt["new"],
                      dict(modes[-1][2], KVFS_PRELOAD_WRITES="lazy"),
                      pid["new"]))
        for b in builds:
            modes.append(("%s plain" % b, mnt[b], dict(os.environ), pid[b]))
        modes.append(("tmpfs", shm, dict(os.environ), None))
        res = {(k, m[0]): [] for k in ("read", "write") for m in modes}
        load0 = os.getloadavg()
        for r in range(R):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for kind in ("read", "write"):
                for name, d, env, dp in order:
                    if kind == "read" and name == "new lazy":
                        continue
                    target = d + "/ns"
                    if kind == "write":
                        target = "%s/w%d.%s" % (d, r, name.replace(" ", ""))
                        os.mkdir(target)
                    c0 = cpu_s(dp) if dp else 0
                    secs, cpu = child([bench, "--reader" if kind == "read"
                                       else "--writer", target, str(SZ),
                                       str(N), "1"], env)
                    dc = (cpu_s(dp) - c0) if dp else 0
                    res[(kind, name)].append((N / secs, cpu / N * 1e6,
                                              dc / N * 1e6))
            for name, d, _, _ in modes:
                shutil.rmtree("%s/w%d.%s" % (d, r, name.replace(" ", "")))
        load1 = os.getloadavg()
    finally:
        for m in mnt.values():
            subprocess.run(["fusermount3", "-u", m])
            os.rmdir(m)
        shutil.rmtree(shm)
    print("SZ=%d N=%d R=%d, load average %.2f -> %.2f" %
          (SZ, N, R, load0[0], load1[0]))
    for kind in ("read", "write"):
        tm = statistics.median(x[0] for x in res[(kind, "tmpfs")])
        print("%s: mode, files/s median (range), x tmpfs, reader CPU/file,"
              " daemon CPU/file (us, medians)" % kind)
        for name, _, _, _ in modes:
            v = res[(kind, name)]
            if not v:
                continue
            fs = [x[0] for x in v]
            print("  %-13s %7.0f (%6.0f-%6.0f) %5.2fx %6.1f %6.1f" %
                  (name, statistics.median(fs), min(fs), max(fs),
                   statistics.median(fs) / tm,
                   statistics.median(x[1] for x in v),
                   statistics.median(x[2] for x in v)))
        # issue 26's targets, on the medians
        for name, _, _, _ in modes:
            v = res[(kind, name)]
            if not v or name == "tmpfs":
                continue
            f = statistics.median(x[0] for x in v)
            x = f / tm
            if kind == "write":
                met, what = x >= 1.0, ">= 1.0x tmpfs"
            elif SZ >= 2 << 20:
                met, what = x >= 0.8, ">= 0.8x tmpfs"
            else:
                met = x >= 0.7 and f >= 12000
                what = ">= 0.7x tmpfs and >= 12,000 files/s"
            print("  target %s %s, %s: %s (%.2fx, %.0f files/s)" %
                  (kind, what, name, "met" if met else "MISSED", x, f))


if __name__ == "__main__":
    main()
