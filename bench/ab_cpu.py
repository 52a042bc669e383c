#!/usr/bin/env python3
"""ab_cpu.py - two (or more) kvfs-mount builds against each other on the
plain read path, alternated: the daemon's CPU time (schedstat of its
threads, which the machine's load moves far less than wall time) and the
reader's wall time per first read of a published chunk.

  N=150 SZ=2097152 /usr/bin/python3 bench/ab_cpu.py OLD/kvfs-mount NEW/kvfs-mount
  N=400 SZ=262144  /usr/bin/python3 bench/ab_cpu.py OLD/kvfs-mount NEW/kvfs-mount

Each round mounts each build on a temporary directory (l1_size=1G), writes
N chunks of SZ bytes, waits 0.5 s, reads each once (open, readv, close)
and unmounts. Three rounds. Run as root (mounts).
"""
import glob
import os
import subprocess
import sys
import tempfile
import time


def daemon_pid(mnt):
    """The mount's daemon: the kvfs-mount process naming mnt with the most
    threads (its watchdog names it too)."""
    pid = None
    for p in glob.glob('/proc/[0-9]*/cmdline'):
        try:
            c = open(p, 'rb').read().split(b'\0')
            q = p.split('/')[2]
            nt = len(os.listdir('/proc/%s/task' % q))
        except OSError:
            continue
        if c and c[0].endswith(b'kvfs-mount') and mnt.encode() in c and \
                (pid is None or nt > pid[1]):
            pid = (q, nt)
    return pid[0]


def cpu_s(pid):
    """Seconds on CPU of every thread of pid (schedstat, ns)."""
    t = 0
    for s in glob.glob('/proc/%s/task/*/schedstat' % pid):
        t += int(open(s).read().split()[0])
    return t / 1e9


def run(binary, n=int(os.environ.get("N", "150")),
        size=int(os.environ.get("SZ", str(2 << 20)))):
    m = tempfile.mkdtemp(prefix='/tmp/kvcpu.')
    subprocess.run([binary, '-o', 'l1_size=1G', m], check=True)
    try:
        pid = daemon_pid(m)
        os.mkdir(m + '/ns')
        data = os.urandom(size)
        for i in range(n):
            with open(m + '/ns/%032x' % (i + 1), 'wb') as f:
                f.write(data)
        time.sleep(0.5)
        buf = bytearray(size)
        c0, t0 = cpu_s(pid), time.perf_counter()
        for i in range(n):
            fd = os.open(m + '/ns/%032x' % (i + 1), os.O_RDONLY)
            os.readv(fd, [buf])
            os.close(fd)
        t1, c1 = time.perf_counter(), cpu_s(pid)
    finally:
        subprocess.run(['fusermount3', '-u', m])
        os.rmdir(m)
    return (c1 - c0) / n * 1e6, (t1 - t0) / n * 1e6


if __name__ == '__main__':  # bench/preload_ab.py imports the helpers
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for r in range(3):
        for b in sys.argv[1:]:
            c, w = run(b)
            print('%-40s daemon cpu %7.1f us/file  wall %7.1f us/file'
                  % (b, c, w), flush=True)
