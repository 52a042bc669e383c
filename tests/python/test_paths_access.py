#!/usr/bin/python3
"""Path namespaces: the batched lookups and GETs by path key
(kvfs.path_keys + Connector.lookup / group_lookup / get_many) reach a file
only as its name does for the caller (fs_path_reach): a file below a
directory the caller may not search is absent to it (as stat could not
tell either), a file it may not read is EACCES for that entry alone, and
a lookup's run stops there (nothing past it pinned). Root reaches
everything, as before. The caller is another user (nobody), on a mount
with allow_other.

Exit 77 (skip) when the daemon or libkvfs is missing, or not root.
"""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

pathmount.need("daemon")
sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
import kvfs  # noqa: E402

M = None
NOBODY = 65534
FILES = {  # path below the namespace: mode
    "open/a.bin": 0o644,
    "open/b.bin": 0o600,
    "priv/c.bin": 0o644,
    "grp/d.bin": 0o644,
    "open/e.bin": 0o640,
}


def setUpModule():
    global M
    M = pathmount.new_mount(["names=paths", "l1_size=16M", "allow_other"],
                            l2=False)


def tearDownModule():
    pathmount.drop_mount(M)


def as_nobody(code):
    """Runs code (which prints one JSON value) as nobody; its value."""
    env = dict(os.environ, PYTHONPATH=os.path.join(pathmount.REPO, "python"))
    r = subprocess.run(
        [sys.executable, "-c",
         "import json, kvfs\n"
         "c = kvfs.Connector(%r, 'acc', create=False)\n"
         "keys = kvfs.path_keys(%r)\n" % (M.mnt, sorted(FILES)) + code],
        user=NOBODY, group=NOBODY, extra_groups=[], env=env,
        capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise AssertionError("nobody's python: %s" % r.stderr)
    return json.loads(r.stdout)


GET_ALL = (
    "out = []\n"
    "for r in c.get_many(keys, [bytearray(64) for _ in keys]):\n"
    "    out.append(r if not isinstance(r, OSError) else -r.errno)\n"
    "print(json.dumps(out))\n")


class Reach(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for ns in ("acc", "acc2"):
            top = os.path.join(M.mnt, ns)
            os.mkdir(top, 0o755)
            os.chmod(top, 0o755)
            for d, mode in (("open", 0o755), ("priv", 0o700),
                            ("grp", 0o750)):
                os.mkdir(os.path.join(top, d))
                os.chmod(os.path.join(top, d), mode)
            os.chown(os.path.join(top, "grp"), 0, NOBODY)
            for p, mode in FILES.items():
                with open(os.path.join(top, p), "wb") as f:
                    f.write(p.encode())
                os.chmod(os.path.join(top, p), mode)
            os.chown(os.path.join(top, "open/e.bin"), 0, NOBODY)
        cls.lib = kvfs.load_library()

    def sizes(self, want):
        """get_many's results for FILES in sorted order: the length of
        each path's bytes where want says "read", else want's value."""
        return [len(p) if want[p] == "read" else want[p]
                for p in sorted(FILES)]

    def test_get_many_follows_modes(self):
        # grp/ is searchable through nobody's group, e.bin readable so;
        # b.bin is 0600: EACCES; c.bin is behind priv/ (0700): absent
        self.assertEqual(as_nobody(GET_ALL), self.sizes({
            "grp/d.bin": "read", "open/a.bin": "read", "open/b.bin": -13,
            "open/e.bin": "read", "priv/c.bin": None}))
        top = os.path.join(M.mnt, "acc")
        try:
            os.chmod(os.path.join(top, "priv"), 0o711)
            os.chmod(os.path.join(top, "open/b.bin"), 0o604)
            self.assertEqual(as_nobody(GET_ALL), self.sizes({
                "grp/d.bin": "read", "open/a.bin": "read",
                "open/b.bin": "read", "open/e.bin": "read",
                "priv/c.bin": "read"}))
            os.chmod(os.path.join(top, "priv/c.bin"), 0o600)
            os.chmod(os.path.join(top, "grp"), 0o700)
            self.assertEqual(as_nobody(GET_ALL), self.sizes({
                "grp/d.bin": None, "open/a.bin": "read",
                "open/b.bin": "read", "open/e.bin": "read",
                "priv/c.bin": -13}))
        finally:
            os.chmod(os.path.join(top, "priv"), 0o700)
            os.chmod(os.path.join(top, "priv/c.bin"), 0o644)
            os.chmod(os.path.join(top, "open/b.bin"), 0o600)
            os.chmod(os.path.join(top, "grp"), 0o750)
        # what plain opens say, for the record: the same
        r = as_nobody(
            "import errno, os\n"
            "out = []\n"
            "for p in %r:\n"
            "    try:\n"
            "        open(os.path.join(%r, 'acc', p), 'rb').close()\n"
            "        out.append(0)\n"
            "    except OSError as e:\n"
            "        out.append(e.errno)\n"
            "print(json.dumps(out))\n" % (sorted(FILES), M.mnt))
        self.assertEqual(r, [0, 0, 13, 0, 13])

    def test_root_reaches_everything(self):
        with kvfs.Connector(M.mnt, "acc", create=False) as c:
            keys = kvfs.path_keys(sorted(FILES))
            res = c.get_many(keys, [bytearray(64) for _ in keys])
            self.assertEqual(res, [len(p) for p in sorted(FILES)])
            self.assertEqual(c.lookup(keys).found, len(FILES))

    def test_connector_get_takes_names_here(self):
        """Connector.get(key, out) in a path namespace opens the file
        named by the key's hex digits, as get(key) does: it does not
        read the file whose path the key hashes (get_many does)."""
        k = kvfs.path_key("open/a.bin")
        top = os.path.join(M.mnt, "acc")
        with kvfs.Connector(M.mnt, "acc", create=False) as c:
            self.assertIsNone(c.get(k, bytearray(64)))
            self.assertEqual(c.get_many([k], [bytearray(64)]), [10])
            with open(os.path.join(top, k.hex()), "wb") as f:
                f.write(b"named by hex")
            try:
                out = bytearray(64)
                self.assertEqual(c.get(k, out), 12)
                self.assertEqual(bytes(out[:12]), b"named by hex")
                self.assertEqual(c.get(k), b"named by hex")
            finally:
                os.unlink(os.path.join(top, k.hex()))

    def test_lookups_stop_where_the_name_is_out_of_reach(self):
        r = as_nobody(
            "ks = dict(zip(%r, keys))\n"
            "runs = [c.lookup([ks[p] for p in chain]).found for chain in (\n"
            "    ['open/a.bin', 'open/b.bin', 'grp/d.bin'],\n"
            "    ['open/a.bin', 'priv/c.bin', 'grp/d.bin'],\n"
            "    ['priv/c.bin'])]\n"
            "res = c.lookup([ks['open/a.bin'], ks['priv/c.bin']], pin=True)\n"
            "runs += [res.found, len(res.leases)]\n"
            "c.release(res)\n"
            "runs.append(c.group_lookup(['acc', 'acc2'],\n"
            "    [ks['open/a.bin'], ks['open/e.bin'], ks['priv/c.bin']])"
            ".found)\n"
            "print(json.dumps(runs))\n" % sorted(FILES))
        # b.bin (0600) can be stat'ed, so it is found; c.bin cannot
        self.assertEqual(r, [3, 1, 0, 1, 1, 2])
        # nothing of priv/ was pinned by that lookup
        c_path = os.path.join(M.mnt, "acc", "priv/c.bin")
        self.assertEqual(os.getxattr(c_path, "user.kvfs.refs"), b"0")


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("skip: needs root (files of another user, allow_other)")
        sys.exit(77)
    try:
        kvfs.load_library()
    except OSError as e:
        print("skip: %s" % e)
        sys.exit(77)
    unittest.main()
