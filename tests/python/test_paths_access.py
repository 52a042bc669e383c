#!/usr/bin/python3
"""Path namespaces: the batched lookups and GETs by path key
(kvfs.path_keys + Connector.lookup / group_lookup / get_many) reach a file
only as its name does for the caller (fs_path_reach): a file below a
directory the caller may not search (the namespace's root included) is
absent to it (as stat could not tell either), and a wait for it lasts as
long as for an absent one; a file it may not read is EACCES for that GET
entry alone; a lookup's run stops there (nothing past it pinned). Root
reaches everything, as before, unless it dropped CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (then its mode bits decide). A GET sees a file closed
just before it, and decides again once pinned: renames racing GETs never
serve a file the caller may not read.
The caller is another user (nobody), on a mount with allow_other.

Exit 77 (skip) when the daemon or libkvfs is missing, or not root, or
nobody cannot run this interpreter.
"""
import errno
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

pathmount.need("daemon")
sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
import kvfs  # noqa: E402

M = None
NOBODY = pathmount.NOBODY
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


def as_nobody(code, ns="acc"):
    """Runs code (which prints one JSON value) as nobody, with c a
    Connector on namespace ns and keys the path keys of FILES (sorted);
    its value."""
    r = pathmount.run_as(
        "import json, time, kvfs\n"
        "c = kvfs.Connector(%r, %r, create=False)\n"
        "keys = kvfs.path_keys(%r)\n" % (M.mnt, ns, sorted(FILES)) + code)
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
        for ns in ("acc", "acc2", "nox"):
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
        # readable, not searchable: names listed, nothing below reached
        os.chmod(os.path.join(M.mnt, "nox"), 0o744)

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

    def test_root_without_search(self):
        """A namespace nobody may read (list) but not search: no file in
        it is reached by a lookup (stat would say EACCES too), and a GET
        is EACCES whole, as before."""
        r = as_nobody(
            "r = c.lookup(keys[:1], pin=True)\n"
            "try:\n"
            "    c.get_many(keys[:1], [bytearray(64)]); e = 0\n"
            "except OSError as x:\n"
            "    e = x.errno\n"
            "print(json.dumps([r.found, len(r.leases), e]))\n", "nox")
        self.assertEqual(r, [0, 0, 13])

    def test_waits_do_not_tell_a_hidden_file(self):
        """A wait for a file below a directory the caller may not search
        lasts as long as one for a file that is not there (lookup and
        GET); a reachable file ends it at once."""
        r = as_nobody(
            "ks = dict(zip(%r, keys))\n"
            "gone = kvfs.path_key('open/none.bin')\n"
            "out = []\n"
            "for k in (ks['priv/c.bin'], gone, ks['open/a.bin']):\n"
            "    t = time.monotonic()\n"
            "    f = c.lookup([k], wait=0.4).found\n"
            "    g = c.get_many([k], [bytearray(64)], wait=0.4)[0]\n"
            "    out.append([f, g, round(time.monotonic() - t, 2)])\n"
            "print(json.dumps(out))\n" % sorted(FILES))
        hidden, absent, there = r
        self.assertEqual(hidden[:2], [0, None])
        self.assertEqual(absent[:2], [0, None])
        self.assertEqual(there[:2], [1, 10])
        self.assertGreaterEqual(hidden[2], 0.75)  # both waits ran out
        self.assertGreaterEqual(absent[2], 0.75)
        self.assertLess(there[2], 0.7)

    def test_get_sees_a_file_closed_just_before(self):
        """A file closed and at once read by path key (no tick between):
        the GET publishes closed files first, as a lookup does."""
        p = os.path.join(M.mnt, "acc", "open", "fresh.bin")
        try:
            with kvfs.Connector(M.mnt, "acc", create=False) as c:
                for i in range(20):
                    with open(p, "wb") as f:
                        f.write(b"fresh%02d" % i)
                    out = bytearray(64)
                    k = kvfs.path_key("open/fresh.bin")
                    self.assertEqual(c.get_many([k], [out]), [7])
                    self.assertEqual(bytes(out[:7]), b"fresh%02d" % i)
                    os.unlink(p)
        finally:
            if os.path.exists(p):
                os.unlink(p)

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


class Races(unittest.TestCase):
    """What a GET decides is decided again once the chunk is pinned, on
    the name as it is then (fs_path_check): a file its caller may not
    read is never served, whatever renames or rewrites run beside it."""

    @classmethod
    def setUpClass(cls):
        top = os.path.join(M.mnt, "race")
        os.mkdir(top, 0o755)
        os.chmod(top, 0o755)
        # a directory everyone may write (so nobody may rename in it),
        # holding a file of uid 1000 that only its owner may read
        cls.dir = os.path.join(top, "pub")
        os.mkdir(cls.dir)
        os.chmod(cls.dir, 0o777)
        for name, mode in (("s", 0o600), ("mine", 0o644)):
            with open(os.path.join(cls.dir, name), "wb") as f:
                f.write(b"SECRET-of-uid1000" if name == "s" else b"ok")
            os.chown(os.path.join(cls.dir, name), 1000, 1000)
            os.chmod(os.path.join(cls.dir, name), mode)
        cls.priv = os.path.join(top, "d1000")
        os.mkdir(cls.priv)
        os.chown(cls.priv, 1000, 1000)
        os.chmod(cls.priv, 0o700)
        with open(os.path.join(cls.priv, "f"), "wb") as f:
            f.write(b"hidden")

    def test_renames_racing_gets(self):
        """nobody renames uid 1000's 0600 file back and forth (it may:
        the directory is 0777) while it GETs both names by path key, as
        is and with KVFS_XFER_NAMED: the bytes never come back (before
        the check after the pin, a GET whose permission check fell in
        the moment the key had no name served them)."""
        r = as_nobody(
            "import os, threading\n"
            "d = %r\n"
            "stop = time.monotonic() + 2.0\n"
            "def flip():\n"
            "    while time.monotonic() < stop:\n"
            "        try:\n"
            "            os.rename(d + '/s', d + '/t')\n"
            "            os.rename(d + '/t', d + '/s')\n"
            "        except OSError:\n"
            "            pass\n"
            "th = threading.Thread(target=flip); th.start()\n"
            "ks = kvfs.path_keys(['pub/s', 'pub/t'])\n"
            "tries = leaks = 0\n"
            "while time.monotonic() < stop:\n"
            "    bufs = [bytearray(64), bytearray(64)]\n"
            "    res = c.get_many(ks, bufs)\n"
            "    tries += 1\n"
            "    for n, b in zip(res, bufs):\n"
            "        if isinstance(n, int) and n > 0:\n"
            "            leaks += 1\n"
            "th.join()\n"
            "print(json.dumps([tries, leaks]))\n" % self.dir, "race")
        tries, leaks = r
        self.assertGreater(tries, 100)
        self.assertEqual(leaks, 0, "served %d times in %d GETs" % (
            leaks, tries))
        # and it is still its owner's file, whole
        names = os.listdir(self.dir)
        name = "s" if "s" in names else "t"
        with open(os.path.join(self.dir, name), "rb") as f:
            self.assertEqual(f.read(), b"SECRET-of-uid1000")
        if name == "t":
            os.rename(os.path.join(self.dir, "t"),
                      os.path.join(self.dir, "s"))

    def test_rename_of_an_open_file_onto_a_private_one(self):
        """nobody renames a file of its own, still open for writing, onto
        uid 1000's published 0600 file (the 0777 directory lets it): the
        name keeps uid 1000's version until that writer closes, and with
        it uid 1000's mode and owner, so neither a GET by path key nor an
        open gives nobody those bytes (both did: the name had taken the
        new file's 0644 and the namespace's owner for them)."""
        victim = os.path.join(self.dir, "v")
        with open(victim, "wb") as f:
            f.write(b"VICTIM-0600-BYTES")
        os.chown(victim, 1000, 1000)
        os.chmod(victim, 0o600)
        with kvfs.Connector(M.mnt, "race", create=False) as c:
            # published now (a GET publishes closed files first)
            self.assertEqual(c.get_many(kvfs.path_keys(["pub/v"]),
                                        [bytearray(64)]), [17])
        r = as_nobody(
            "import errno, os\n"
            "d = %r\n"
            "fd = os.open(d + '/mine_w', os.O_CREAT | os.O_WRONLY, 0o644)\n"
            "os.rename(d + '/mine_w', d + '/v')\n"
            "res = c.get_many(kvfs.path_keys(['pub/v']), [bytearray(64)])\n"
            "g = res[0] if not isinstance(res[0], OSError) else"
            " -res[0].errno\n"
            "try:\n"
            "    o = open(d + '/v', 'rb').read().decode()\n"
            "except OSError as e:\n"
            "    o = e.errno\n"
            "st = os.stat(d + '/v')\n"
            "os.close(fd)\n"
            "print(json.dumps([g, o, st.st_uid, st.st_mode & 0o777]))\n"
            % self.dir, "race")
        g, o, uid, mode = r
        # the name keeps uid 1000's version until that writer closes
        # (kvfs(7)), now with uid 1000's mode and owner: neither a GET
        # nor an open gives nobody its bytes (both did, as 0644 root's)
        self.assertTrue(g is None or g < 0, r)
        self.assertNotEqual(o, "VICTIM-0600-BYTES", r)
        self.assertIn([uid, mode], ([1000, 0o600], [NOBODY, 0o644]), r)

    def test_chmod_widened_during_a_rewrite(self):
        """A 0600 file of root is rewritten with O_TRUNC and made 0644
        (by name, and on another file by fchmod of the writer's fd) while
        the writer is open: nobody never reads its old bytes (they were
        0600: an open during the rewrite is EACCES, as is a reopen of an
        fd nobody got before), and reads the new ones once the writer
        closed, 0644 (the old version's mode was widened, or the chmod
        lost at the close). Also: a rewrite by nobody drops set-id bits."""
        for how in ("chmod", "fchmod"):
            p = os.path.join(self.dir, "w" + how)
            with open(p, "wb") as f:
                f.write(b"OLD-SECRET")
            os.chmod(p, 0o600)
            time.sleep(0.3)  # published, as long ago
            w = os.open(p, os.O_WRONLY | os.O_TRUNC)
            os.write(w, b"NEW-PUBLIC")
            if how == "chmod":
                os.chmod(p, 0o644)
            else:
                os.fchmod(w, 0o644)
            code = ("import os\ntry:\n"
                    "    o = open(%r, 'rb').read().decode()\n"
                    "except OSError as e:\n"
                    "    o = e.errno\n"
                    "print(json.dumps(o))\n" % p)
            self.assertEqual(as_nobody(code, "race"), errno.EACCES, how)
            os.close(w)
            st = os.stat(p)
            self.assertEqual(st.st_mode & 0o7777, 0o644, how)
            self.assertEqual(as_nobody(code, "race"), "NEW-PUBLIC", how)
        p = os.path.join(self.dir, "suid")
        with open(p, "wb") as f:
            f.write(b"x")
        os.chmod(p, 0o6777)
        time.sleep(0.3)
        as_nobody("import os\nfd = os.open(%r, os.O_WRONLY | os.O_TRUNC)\n"
                  "os.utime(fd)\n"  # a times-only change keeps them out
                  "os.write(fd, b'y')\nos.close(fd)\nprint(1)\n" % p,
                  "race")
        self.assertEqual(os.stat(p).st_mode & 0o7777, 0o777)

    def test_root_without_dac_capabilities(self):
        """Root whose capabilities lack CAP_DAC_OVERRIDE and
        CAP_DAC_READ_SEARCH (a container that dropped them) reads by
        path key what its open(2) may read: uid 1000's 0600 file is
        EACCES, a file below its 0700 directory absent; a 0644 file
        is read. Root with them reads all three."""
        code = (
            "import json, os, sys\n"
            "sys.path.insert(0, %r)\n"
            "import kvfs\n"
            "c = kvfs.Connector(%r, 'race', create=False)\n"
            "ps = ['pub/s', 'd1000/f', 'pub/mine']\n"
            "res = c.get_many(kvfs.path_keys(ps), [bytearray(64)"
            " for _ in ps])\n"
            "out = [r if not isinstance(r, OSError) else -r.errno"
            " for r in res]\n"
            "for p in ps:\n"
            "    try:\n"
            "        open(os.path.join(%r, 'race', p), 'rb').close()\n"
            "        out.append(0)\n"
            "    except OSError as e:\n"
            "        out.append(e.errno)\n"
            "print(json.dumps(out))\n" % (
                os.path.join(pathmount.REPO, "python"), M.mnt, M.mnt))
        if not shutil.which("setpriv"):
            self.skipTest("setpriv is not installed")
        drop = ["setpriv", "--inh-caps=-all",
                "--bounding-set=-dac_override,-dac_read_search"]
        for argv, want in ((drop, [-13, None, 2, 13, 13, 0]),
                           ([], [17, 6, 2, 0, 0, 0])):
            r = subprocess.run(argv + [sys.executable, "-c", code],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout), want, argv)


OWNER = 1000  # the files' owner: neither root nor nobody


class KeptAcrossRestarts(unittest.TestCase):
    """Modes and owners of files and directories are in l2_dir/paths: a
    clean remount and a SIGKILL of the daemon (once the journal was
    synced) give back the file chmod'ed 0600 and chown'ed to uid 1000
    (EACCES for nobody, its bytes and attributes for root) and the 0700
    directory of uid 1000 (nobody cannot search it). Before, both came
    back 0644 / 0755 and root's, readable by nobody."""

    @classmethod
    def setUpClass(cls):
        cls.m = pathmount.new_mount(
            ["names=paths", "l1_size=16M", "max_chunk=4M", "l2_size=128M",
             "ingest=evicted", "flush_on_exit=1", "allow_other"])

    @classmethod
    def tearDownClass(cls):
        pathmount.drop_mount(cls.m)

    def make(self, ns):
        """ns/pub/f.bin 0600 of OWNER (chmod'ed once published), ns/priv
        0700 of OWNER (chmod'ed after mkdir) holding g.bin; their bytes."""
        top = os.path.join(self.m.mnt, ns)
        os.mkdir(top, 0o755)
        os.chmod(top, 0o755)
        os.makedirs(os.path.join(top, "pub"))
        os.mkdir(os.path.join(top, "priv"), 0o755)
        data = {"pub/f.bin": os.urandom(70000),
                "priv/g.bin": os.urandom(5000)}
        for p, b in data.items():
            with open(os.path.join(top, p), "wb") as f:
                f.write(b)
            with open(os.path.join(top, p), "rb") as f:  # published
                self.assertEqual(f.read(), b)
        f = os.path.join(top, "pub/f.bin")
        os.chown(f, OWNER, OWNER)
        os.chmod(f, 0o600)
        os.utime(f, ns=(1600000000123456789, 1600000000123456789))
        os.chown(os.path.join(top, "priv"), OWNER, OWNER)
        os.chmod(os.path.join(top, "priv"), 0o700)
        return data

    def check(self, ns, data, when):
        top = os.path.join(self.m.mnt, ns)
        for p, b in data.items():
            with open(os.path.join(top, p), "rb") as f:
                self.assertEqual(f.read(), b, (when, p))
        st = os.stat(os.path.join(top, "pub/f.bin"))
        self.assertEqual((oct(st.st_mode), st.st_uid, st.st_gid),
                         (oct(0o100600), OWNER, OWNER), when)
        self.assertEqual(st.st_mtime_ns, 1600000000123456789, when)
        st = os.stat(os.path.join(top, "priv"))
        self.assertEqual((oct(st.st_mode), st.st_uid, st.st_gid),
                         (oct(0o40700), OWNER, OWNER), when)
        r = pathmount.run_as(
            "import os\n"
            "for p in ('pub/f.bin', 'priv/g.bin'):\n"
            "    try:\n"
            "        open(os.path.join(%r, p), 'rb').close()\n"
            "        print(0)\n"
            "    except OSError as e:\n"
            "        print(e.errno)\n"
            "try:\n"
            "    os.stat(os.path.join(%r, 'priv/g.bin'))\n"
            "    print(0)\n"
            "except OSError as e:\n"
            "    print(e.errno)\n" % (top, top))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["13", "13", "13"], when)

    def test_clean_restart(self):
        data = self.make("keep1")
        self.check("keep1", data, "before")
        self.m.remount()
        self.check("keep1", data, "after a clean remount")

    def rewrite_journal(self, how):
        """Rewrites l2_dir/paths (the mount down) record by record: how
        "kvp1" drops every record's attributes (an older daemon's
        journal), "no_mtime" keeps them with an mtime of 0 s and 0 ns
        (what a file whose mtime was never its own is written with)."""
        import ctypes
        import struct
        try:
            xxh = ctypes.CDLL("libxxhash.so.0")
        except OSError as e:
            self.skipTest("no libxxhash: %s" % e)
        xxh.XXH3_64bits.restype = ctypes.c_uint64
        xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        jpath = os.path.join(self.m.l2, "paths")
        with open(jpath, "rb") as f:
            old, new, at = f.read(), b"", 0
        while at < len(old):
            magic, = struct.unpack_from("<I", old, at)
            nl, pl = old[at + 9], struct.unpack_from("<H", old, at + 10)[0]
            extra = 24 if magic == 0x3250564b else 0
            names = old[at + 12 + extra:at + 12 + extra + nl + pl]
            if extra and how == "no_mtime":
                body = old[at + 8:at + 24] + bytes(12) + names
            else:
                magic, body = 0x3150564b, old[at + 8:at + 12] + names
            new += struct.pack("<II", magic,
                               xxh.XXH3_64bits(body, len(body)) &
                               0xffffffff) + body
            at += 12 + extra + nl + pl
        with open(jpath, "wb") as f:
            f.write(new)
        return len(old) - len(new)

    def test_old_journal(self):
        """Records of an older daemon (KVP1, no attributes) are still
        replayed, as before: files 0644, directories 0755, the
        namespace's owner; the bytes are the files'."""
        data = self.make("keep3")
        self.m.unmount()
        # KVP2 records were there
        self.assertGreater(self.rewrite_journal("kvp1"), 0)
        self.m.mount()
        top = os.path.join(self.m.mnt, "keep3")
        for p, b in data.items():
            with open(os.path.join(top, p), "rb") as f:
                self.assertEqual(f.read(), b, p)
        st = os.stat(os.path.join(top, "pub/f.bin"))
        self.assertEqual((oct(st.st_mode), st.st_uid),
                         (oct(0o100644), 0))
        st = os.stat(os.path.join(top, "priv"))
        self.assertEqual((oct(st.st_mode), st.st_uid), (oct(0o40755), 0))
        # Such a file shows its publication's time; a chmod or chown
        # keeps it (it saved 1970 once: the name had no mtime of its
        # own), and so does the next restart.
        f = os.path.join(top, "pub/f.bin")
        shown = os.stat(f).st_mtime_ns
        self.assertGreater(shown, 1_600_000_000 * 10**9)
        os.chmod(f, 0o600)
        os.chown(f, 0, 0)
        st = os.stat(f)
        self.assertEqual((oct(st.st_mode), st.st_mtime_ns),
                         (oct(0o100600), shown))
        self.m.remount()
        st = os.stat(f)
        self.assertEqual((oct(st.st_mode), st.st_mtime_ns),
                         (oct(0o100600), shown))

    def test_journal_without_mtime(self):
        """A record with attributes but an mtime of 0 s and 0 ns (a file
        whose mtime was never its own, chmod'ed once) comes back with its
        mode and owner and the publication's time, not 1970."""
        data = self.make("keep4")
        self.m.unmount()
        self.assertEqual(self.rewrite_journal("no_mtime"), 0)
        self.m.mount()
        f = os.path.join(self.m.mnt, "keep4", "pub/f.bin")
        with open(f, "rb") as fh:
            self.assertEqual(fh.read(), data["pub/f.bin"])
        st = os.stat(f)
        self.assertEqual((oct(st.st_mode), st.st_uid, st.st_gid),
                         (oct(0o100600), OWNER, OWNER))
        self.assertGreater(st.st_mtime_ns, 1_700_000_000 * 10**9)

    def test_crash(self):
        data = self.make("keep2")
        # in L2 before the kill: the fillers push them out of L1
        top = os.path.join(self.m.mnt, "keep2")
        for i in range(12):
            with open(os.path.join(top, "fill%d" % i), "wb") as f:
                f.write(os.urandom(2 << 20))
        for p in data:
            path = os.path.join(top, p)
            end = time.monotonic() + 10
            while pathmount.tier_of(path) != "l2" and \
                    time.monotonic() < end:
                time.sleep(0.05)
            self.assertEqual(pathmount.tier_of(path), "l2", p)
        time.sleep(1)  # the journal's fdatasync (every 0.25 s)
        self.m.daemon.kill()
        self.m.daemon.wait()
        self.m.daemon = None
        self.m.unmount()
        self.m.mount()
        self.check("keep2", data, "after SIGKILL")



class ChmodAfterCopyingRename(unittest.TestCase):
    """rename(p.tmp, f) of a file already published (a GET or LOOKUP
    publishes closed files at once, the background thread 0.2 s after
    their close) copies it to f's key; the kernel keeps p.tmp's inode
    for f until the daemon's invalidation reaches it, and an fd opened
    before the rename keeps it for good. A chmod or chown through that
    inode (fchmod of such an fd; chmod(f) in that window, as
    `rename(p.tmp, f); chmod(f, 0600)` right after a GET) returned 0
    and changed only the old version: f stayed 0644 and root's, nobody
    read it by open and by GET, and it came back so after a restart.
    Now the name takes it, as on a local filesystem."""

    @classmethod
    def setUpClass(cls):
        cls.m = pathmount.new_mount(
            ["names=paths", "l1_size=16M", "max_chunk=4M", "l2_size=64M",
             "ingest=evicted", "flush_on_exit=1", "allow_other"])
        cls.top = os.path.join(cls.m.mnt, "cp")
        os.mkdir(cls.top, 0o755)
        os.chmod(cls.top, 0o755)
        cls.dir = os.path.join(cls.top, "d")
        os.mkdir(cls.dir, 0o755)

    @classmethod
    def tearDownClass(cls):
        pathmount.drop_mount(cls.m)

    def nobody_reads(self, names):
        """[GET result or -errno, open's bytes or errno] of each name for
        nobody."""
        return pathmount.run_as(
            "import json, kvfs\n"
            "c = kvfs.Connector(%r, 'cp', create=False)\n"
            "ns = %r\n"
            "res = c.get_many(kvfs.path_keys(['d/' + n for n in ns]),"
            " [bytearray(64) for _ in ns])\n"
            "out = []\n"
            "for n, r in zip(ns, res):\n"
            "    g = r if not isinstance(r, OSError) else -r.errno\n"
            "    try:\n"
            "        o = open(%r + '/' + n, 'rb').read().decode()\n"
            "    except OSError as e:\n"
            "        o = e.errno\n"
            "    out.append([g, o])\n"
            "print(json.dumps(out))\n" % (self.m.mnt, names, self.dir))

    def test_chmod_through_the_old_inode(self):
        c = kvfs.Connector(self.m.mnt, "cp", create=False)
        other = kvfs.path_keys(["none"])
        names, want = [], {}
        for i in range(24):
            how = ("fchmod", "fchmod-late", "fchown", "chmod")[i % 4]
            n = "f%d" % i
            tmp = os.path.join(self.dir, n + ".tmp")
            with open(tmp, "wb") as f:
                f.write(b"SECRET %d" % i)
            os.chmod(tmp, 0o644)
            c.lookup(other)  # publishes the closed file (op_ioctl)
            if how == "fchmod-late":
                time.sleep(0.3)  # the kernel's entry of tmp dropped
            fd = os.open(tmp, os.O_RDONLY)
            os.rename(tmp, os.path.join(self.dir, n))
            if how == "chmod":
                os.chmod(os.path.join(self.dir, n), 0o600)
            elif how == "fchown":
                os.fchown(fd, OWNER, OWNER)
                os.fchmod(fd, 0o600)
            else:
                os.fchmod(fd, 0o600)
            os.close(fd)
            names.append(n)
            want[n] = (0o100600, OWNER if how == "fchown" else 0)
        c.close()
        out = self.nobody_reads(names)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = dict(zip(names, json.loads(out.stdout)))
        leaks = {n: r for n, r in got.items()
                 if (r[0] is not None and r[0] >= 0) or
                 isinstance(r[1], str)}
        self.assertEqual(leaks, {})
        time.sleep(0.3)  # the kernel's entries of the names renewed
        for when in ("before", "after a clean remount"):
            st = {n: (os.stat(os.path.join(self.dir, n)).st_mode,
                      os.stat(os.path.join(self.dir, n)).st_uid)
                  for n in names}
            self.assertEqual(st, want, when)
            if when == "before":
                self.m.remount()
        out = self.nobody_reads(names)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual([r[1] for r in json.loads(out.stdout)],
                         [errno.EACCES] * len(names))

    def test_old_fd_of_a_file_chowned_since(self):
        """nobody's fd of its file, opened before root renamed the file
        and chown'ed it (by its new name) to uid 1000: nobody's fchmod
        through it is EPERM (the kernel let it through: that inode is
        still nobody's), and the file keeps uid 1000's mode."""
        tmp = os.path.join(self.dir, "n.tmp")
        f = os.path.join(self.dir, "n")
        with open(tmp, "wb") as fp:
            fp.write(b"of nobody")
        os.chown(tmp, NOBODY, NOBODY)
        with kvfs.Connector(self.m.mnt, "cp", create=False) as c:
            c.lookup(kvfs.path_keys(["none"]))  # published
        h = subprocess.Popen(
            [sys.executable, "-c",
             "import os, sys\n"
             "fd = os.open(%r, os.O_RDONLY)\n"
             "print('open', flush=True)\n"
             "sys.stdin.readline()\n"
             "try:\n"
             "    os.fchmod(fd, 0o666)\n"
             "    print(0)\n"
             "except OSError as e:\n"
             "    print(e.errno)\n" % tmp],
            user=NOBODY, group=NOBODY, extra_groups=[], text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            self.assertEqual(h.stdout.readline(), "open\n")
            os.rename(tmp, f)
            time.sleep(0.3)  # the kernel's entry of f renewed
            os.chown(f, OWNER, OWNER)
            os.chmod(f, 0o640)
            out, _ = h.communicate("go\n", timeout=30)
        finally:
            if h.poll() is None:
                h.kill()
                h.wait()
        self.assertEqual(out.split(), [str(errno.EPERM)])
        st = os.stat(f)
        self.assertEqual((oct(st.st_mode), st.st_uid),
                         (oct(0o100640), OWNER))

    def test_renamed_away_and_back(self):
        """An fd opened before f -> f.bak -> f (and d/x -> d2/x -> d/x):
        the name is back under its old key with a copy, and an fchmod
        through the fd's old inode was taken for that of a version an
        O_TRUNC rewrite replaced: it returned 0, f stayed 0644 and
        nobody read it."""
        d2 = os.path.join(self.top, "d2")
        os.makedirs(d2, exist_ok=True)
        names = []
        with kvfs.Connector(self.m.mnt, "cp", create=False) as c:
            for i, away in enumerate(("b%d.bak", "../d2/b%d") * 2):
                n = "b%d" % i
                f = os.path.join(self.dir, n)
                with open(f, "wb") as fp:
                    fp.write(b"SECRET %d" % i)
                os.chmod(f, 0o644)
                c.lookup(kvfs.path_keys(["none"]))  # published
                fd = os.open(f, os.O_RDONLY)
                other = os.path.join(self.dir, away % i)
                os.rename(f, other)
                os.rename(other, f)
                os.fchmod(fd, 0o600)
                os.close(fd)
                names.append(n)
        out = self.nobody_reads(names)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual([r[1] for r in json.loads(out.stdout)],
                         [errno.EACCES] * len(names))
        time.sleep(0.3)  # the kernel's entries of the names renewed
        self.assertEqual([oct(os.stat(os.path.join(self.dir, n)).st_mode)
                          for n in names], [oct(0o100600)] * len(names))

if __name__ == "__main__":
    try:
        kvfs.load_library()
    except OSError as e:
        print("skip: %s" % e)
        sys.exit(77)
    why = pathmount.run_as_skip_reason()
    if why:
        print("skip: %s" % why)
        sys.exit(77)
    unittest.main()
