#!/usr/bin/python3
"""-o metrics_http in a daemon with more than FD_SETSIZE (1024) files
open, as one with a large L2 has (a descriptor per 64 MiB segment): the
scrape's connection gets a descriptor above 1024, which a select()-based
HTTP server cannot watch (it closed such connections unanswered). The
daemon inherits 1100 descriptors here instead of writing 70 GB of L2.
Mounts a real kvfs daemon ($KVFS_MOUNT_BIN) with pathmount's helper.
"""
import os
import resource
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

EXTRA_FDS = 1100


def bound(mnt):
    with open(os.path.join(mnt, ".kvfs", "config")) as f:
        for line in f:
            if line.startswith("metrics_http="):
                return line.split("=", 1)[1].strip()
    raise AssertionError("no metrics_http= in .kvfs/config")


class ManyFdsTest(unittest.TestCase):
    def test_scrape_with_fds_above_fd_setsize(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = EXTRA_FDS + 512
        if soft < want:
            if hard != resource.RLIM_INFINITY and hard < want:
                self.skipTest("RLIMIT_NOFILE hard limit %d < %d" %
                              (hard, want))
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        fds = [os.open("/dev/null", os.O_RDONLY)
               for _ in range(EXTRA_FDS)]
        try:
            m = pathmount.new_mount(["l1_size=8M", "max_chunk=1M",
                                     "metrics_http=:0"], l2=False,
                                    pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)
        try:
            url = "http://%s/metrics" % bound(m.mnt)
            for method in ("GET", "HEAD", "GET"):
                req = urllib.request.Request(url, method=method)
                with urllib.request.urlopen(req, timeout=10) as r:
                    self.assertEqual(r.status, 200)
                    body = r.read()
                if method == "GET":
                    self.assertIn(b"kvfs_capacity_bytes", body)
        finally:
            pathmount.drop_mount(m)


if __name__ == "__main__":
    pathmount.need("daemon")
    unittest.main()
