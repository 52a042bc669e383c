#!/usr/bin/python3
"""Every figure of .kvfs/stats is documented in kvfs(7), COUNTERS (issue
17, item 6): each leaf key of the stats JSON of a mount with L2 and a
namespace appears as a word in that section (the section lists keys as
"stats l2.reads" or grouped, "stats read.hits_l1, hits_l2"). The metric
families are checked by tests/integ/test_metrics.c; this covers the
stats-only strings too (version, l1.backend, l2_recovery.from).
Mounts a real kvfs daemon ($KVFS_MOUNT_BIN) with pathmount's helper.
"""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402


def counters_section():
    with open(os.path.join(pathmount.REPO, "man", "kvfs.7")) as f:
        text = f.read()
    start = text.index("\n.SH COUNTERS")
    end = text.index("\n.SH ", start + 1)
    return text[start:end].replace("\\_", "_")


def leaves(obj, path=""):
    for k, v in obj.items():
        p = path + "." + k if path else k
        if path == "namespaces":  # keyed by namespace name
            yield from leaves(v, "namespaces.NS")
        elif isinstance(v, dict):
            yield from leaves(v, p)
        else:
            yield p


class CountersDocTest(unittest.TestCase):
    def test_every_stats_key_documented(self):
        m = pathmount.new_mount(["l1_size=8M", "max_chunk=1M",
                                 "l2_size=64M"], l2=True)
        try:
            os.mkdir(os.path.join(m.mnt, "ns"))
            keys = list(leaves(pathmount.stats(m.mnt)))
        finally:
            pathmount.drop_mount(m)
        self.assertIn("l1.backend", keys)
        self.assertIn("namespaces.NS.chunks", keys)
        sec = counters_section()
        missing = [k for k in keys if not re.search(
            r"(?<![\w.])(%s\.)?%s(?!\w)" % (re.escape(k.rsplit(".", 1)[0])
                                            if "." in k else "x",
                                            re.escape(k.rsplit(".", 1)[-1])),
            sec)]
        self.assertEqual(missing, [], "stats keys not in kvfs(7) COUNTERS")


if __name__ == "__main__":
    pathmount.need("daemon")
    unittest.main()
