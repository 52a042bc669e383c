#!/usr/bin/python3
"""KV events end to end: two kvfs mounts on loopback act as two nodes.

A subscriber written with Debian's python3-zmq and python3-msgpack decodes
both event forms the way llm-d's kvevents package does (a batch is
[ts, [events], dp_rank]; an event is a map with "type" or an array whose
first element is the tag; a hash is an integer, or bytes of which the last
8, big-endian, are used) and checks the events of publishes, evictions, L2
demotions and promotions, unlinks, rmdir, restarts, sequence numbers and
replay, and `kvfsctl score` over both nodes.

Run with /usr/bin/python3 (it sees Debian's modules). Exit 77 (skip) when
they or the daemon are missing.
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

try:
    import msgpack
    import zmq
except ImportError as e:  # pragma: no cover
    print("skip: %s (run with /usr/bin/python3; apt-get install "
          "python3-zmq python3-msgpack)" % e)
    sys.exit(77)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
MOUNT_BIN = os.environ.get("KVFS_MOUNT_BIN",
                           os.path.join(REPO, "build", "asan", "kvfs-mount"))
CTL_BIN = os.environ.get("KVFS_CTL_BIN",
                         os.path.join(REPO, "build", "asan", "kvfsctl"))
if not os.path.exists(MOUNT_BIN) or not os.path.exists(CTL_BIN):
    print("skip: %s or %s not built" % (MOUNT_BIN, CTL_BIN))
    sys.exit(77)

CHUNK = 64 * 1024
L1 = 1 << 20            # 16 chunks of 64 KiB fit in L1
TMP = None
NODES = {}


def low64(key_hex):
    return int(key_hex[16:], 16)


def as_u64(h):
    """llm-d's getHashAsUint64: an int as is, bytes: the last 8, BE."""
    if isinstance(h, int):
        return h & (2**64 - 1)
    if isinstance(h, (bytes, bytearray)):
        b = bytes(h)[-8:]
        return int.from_bytes(b.rjust(8, b"\0"), "big")
    raise TypeError("hash of type %r" % type(h))


STORED_FIELDS = ["block_hashes", "parent_block_hash", "token_ids",
                 "block_size", "lora_id", "medium", "lora_name"]
REMOVED_FIELDS = ["block_hashes", "medium"]


def decode_event(ev):
    """One event as a dict with "type", from either form."""
    if isinstance(ev, dict):
        d = dict(ev)
        d["_form"] = "map"
        return d
    assert isinstance(ev, (list, tuple)) and ev, ev
    tag = ev[0]
    names = {"BlockStored": STORED_FIELDS, "BlockRemoved": REMOVED_FIELDS,
             "AllBlocksCleared": []}[tag]
    d = {"type": tag, "_form": "array"}
    for name, v in zip(names, ev[1:]):
        d[name] = v
    return d


def decode_batch(payload):
    b = msgpack.unpackb(payload, raw=False)
    assert isinstance(b, list) and len(b) == 3, b
    ts, events, dp = b
    assert isinstance(ts, float) and dp is None
    return [decode_event(e) for e in events]


class Sub:
    """A SUB socket on one node's PUB, keeping every message."""

    def __init__(self, ctx, ep):
        self.s = ctx.socket(zmq.SUB)
        self.s.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.s.setsockopt(zmq.LINGER, 0)
        self.s.connect(ep)
        self.msgs = []   # (topic, seq, payload, events)

    def pump(self, ms=200):
        end = time.monotonic() + ms / 1000.0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            if not self.s.poll(int(left * 1000) + 1):
                return
            while True:
                try:
                    fr = self.s.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                assert len(fr) == 3, fr
                assert len(fr[1]) == 8
                self.msgs.append((fr[0].decode(),
                                  int.from_bytes(fr[1], "big"), fr[2],
                                  decode_batch(fr[2])))

    def events(self, since=0):
        out = []
        for topic, seq, _, evs in self.msgs[since:]:
            for e in evs:
                out.append((topic, seq, e))
        return out

    def wait_for(self, pred, since=0, ms=5000):
        end = time.monotonic() + ms / 1000.0
        while time.monotonic() < end:
            self.pump(50)
            got = [x for x in self.events(since) if pred(x)]
            if got:
                return got
        return []

    def close(self):
        self.s.close()


class Node:
    def __init__(self, name, extra=""):
        self.name = name
        self.dir = os.path.join(TMP, name)
        self.mnt = os.path.join(self.dir, "mnt")
        self.l2 = os.path.join(self.dir, "l2")
        os.makedirs(self.mnt, exist_ok=True)
        os.makedirs(self.l2, exist_ok=True)
        self.pub = "ipc://%s/pub.sock" % self.dir
        self.rep = "ipc://%s/rep.sock" % self.dir
        self.extra = extra
        self.proc = None

    def opts(self):
        o = ("l1_size=%d,max_chunk=%d,l2_dir=%s,flush_on_exit=1,"
             "events=%s,events_replay=%s,node=%s" %
             (L1, CHUNK, self.l2, self.pub, self.rep, self.name))
        return o + ("," + self.extra if self.extra else "")

    def mount(self):
        before = os.stat(self.mnt).st_dev
        self.proc = subprocess.Popen([MOUNT_BIN, "-f", "-o", self.opts(),
                                      self.mnt])
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("kvfs-mount exited %d" % self.proc.returncode)
            if os.stat(self.mnt).st_dev != before:
                return
            time.sleep(0.01)
        raise RuntimeError("not mounted in 30 s")

    def umount(self):
        if self.proc is None:
            return 0
        subprocess.call(["fusermount3", "-u", self.mnt],
                        stderr=subprocess.DEVNULL)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        if _mounted(self.mnt):
            subprocess.call(["umount", "-l", self.mnt],
                            stderr=subprocess.DEVNULL)
        return rc

    def path(self, *p):
        return os.path.join(self.mnt, *p)

    def stats(self):
        import json
        with open(self.path(".kvfs", "stats")) as f:
            return json.load(f)


def _mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def cleanup():
    for n in NODES.values():
        n.umount()
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)


def _on_signal(sig, frame):
    cleanup()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def setUpModule():
    global TMP
    TMP = tempfile.mkdtemp(prefix="kvfs-evtest.")
    atexit.register(cleanup)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _on_signal)
    NODES["n1"] = Node("n1")
    NODES["n2"] = Node("n2", "events_format=array,events_hash=bytes")
    for n in NODES.values():
        n.mount()


def tearDownModule():
    cleanup()


KEYSEQ = [0]


def newkey():
    KEYSEQ[0] += 1
    return os.urandom(8).hex() + "%016x" % (0x1000 + KEYSEQ[0])


def put(node, ns, key, parent=None, data=None):
    fd = os.open(node.path(ns, key), os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                 0o644)
    try:
        if parent:
            os.setxattr(fd, "user.kvfs.parent", parent.encode())
        os.write(fd, data if data is not None else os.urandom(CHUNK))
    finally:
        os.close(fd)


def mkns(node, ns, tokens=None):
    os.mkdir(node.path(ns))
    if tokens is not None:
        os.setxattr(node.path(ns), "user.kvfs.chunk_tokens",
                    str(tokens).encode())


class Base(unittest.TestCase):
    ctx = None

    @classmethod
    def setUpClass(cls):
        cls.ctx = zmq.Context()

    @classmethod
    def tearDownClass(cls):
        cls.ctx.term()

    def sub(self, node):
        s = Sub(self.ctx, node.pub)
        self.addCleanup(s.close)
        # the slow joiner: probe with a namespace until events arrive
        probe = "probe-%s" % newkey()[:8]
        mkns(node, probe)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            put(node, probe, newkey(), data=b"x")
            s.pump(100)
            if s.msgs:
                break
        self.assertTrue(s.msgs, "no events from %s" % node.name)
        for f in os.listdir(node.path(probe)):
            os.unlink(node.path(probe, f))
        os.rmdir(node.path(probe))
        s.wait_for(lambda x: x[2]["type"] == "AllBlocksCleared"
                   and x[0].endswith("@" + probe))
        s.msgs.clear()
        return s


class PublishTest(Base):
    def test_stored_hash_parent_block_size_both_forms(self):
        for node, form in ((NODES["n1"], "map"), (NODES["n2"], "array")):
            s = self.sub(node)
            mkns(node, "pub", tokens=16)
            k1, k2 = newkey(), newkey()
            put(node, "pub", k1)
            put(node, "pub", k2, parent=k1)
            got = s.wait_for(lambda x: x[2]["type"] == "BlockStored" and
                             as_u64(x[2]["block_hashes"][0]) == low64(k2))
            self.assertEqual(len(got), 1)
            topic, seq, e = got[0]
            self.assertEqual(topic, "kv@%s@pub" % node.name)
            self.assertEqual(e["_form"], form)
            self.assertEqual(as_u64(e["parent_block_hash"]), low64(k1))
            self.assertEqual(e["block_size"], 16)
            self.assertEqual(e["token_ids"], [])
            self.assertIsNone(e["lora_id"])
            self.assertIsNone(e["lora_name"])
            self.assertEqual(e["medium"], "CPU")
            if form == "array":   # events_hash=bytes: the 16 key bytes
                self.assertEqual(bytes(e["block_hashes"][0]),
                                 bytes.fromhex(k2))
            else:
                self.assertEqual(e["block_hashes"][0], low64(k2))
            first = [x for x in s.events()
                     if as_u64(x[2]["block_hashes"][0]) == low64(k1)]
            self.assertEqual(len(first), 1)
            self.assertIsNone(first[0][2]["parent_block_hash"])
            # exactly one BlockStored per publish
            stored = [x for x in s.events() if x[2]["type"] == "BlockStored"
                      and x[0] == "kv@%s@pub" % node.name]
            self.assertEqual(len(stored), 2, stored)

    def test_unlink_and_rmdir(self):
        node = NODES["n1"]
        s = self.sub(node)
        mkns(node, "gone")
        k = newkey()
        put(node, "gone", k)
        os.unlink(node.path("gone", k))
        # (a put may also demote another namespace's chunk: its topic)
        got = s.wait_for(lambda x: x[2]["type"] == "BlockRemoved" and
                         x[0] == "kv@n1@gone")
        self.assertEqual(len(got), 1)
        self.assertEqual(as_u64(got[0][2]["block_hashes"][0]), low64(k))
        self.assertEqual(got[0][2]["medium"], "CPU")
        os.rmdir(node.path("gone"))
        got = s.wait_for(lambda x: x[2]["type"] == "AllBlocksCleared" and
                         x[0] == "kv@n1@gone")
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0][0], "kv@n1@gone")

    def test_sequence_contiguous_and_replay(self):
        node = NODES["n1"]
        s = self.sub(node)
        mkns(node, "seq")
        keys = [newkey() for _ in range(40)]
        for k in keys:
            put(node, "seq", k)
        s.wait_for(lambda x: x[2]["type"] == "BlockStored" and
                   as_u64(x[2]["block_hashes"][0]) == low64(keys[-1]))
        seqs = [m[1] for m in s.msgs]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
        # replay from a past sequence: exactly the batches since then
        start = seqs[len(seqs) // 2]
        d = self.ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.setsockopt(zmq.RCVTIMEO, 5000)
        d.connect(node.rep)
        d.send_multipart([b"", start.to_bytes(8, "big")])
        got = []
        while True:
            fr = d.recv_multipart()
            self.assertEqual(len(fr), 3)
            self.assertEqual(fr[0], b"")
            seq = int.from_bytes(fr[1], "big", signed=True)
            if seq == -1:
                self.assertEqual(fr[2], b"")
                break
            got.append((seq, fr[2]))
        want = [(m[1], m[2]) for m in s.msgs if m[1] >= start]
        # batches published after our pump may follow: compare the prefix
        self.assertEqual(got[:len(want)], want)
        d.close()


class TierTest(Base):
    def test_demotion_promotion_eviction(self):
        node = NODES["n1"]
        s = self.sub(node)
        mkns(node, "tiers")
        keys = [newkey() for _ in range(40)]   # > 16 fit in L1
        for k in keys:
            put(node, "tiers", k)
        first = keys[0]
        got = s.wait_for(lambda x: x[2]["type"] == "BlockStored" and
                         x[2]["medium"] == "DISK" and
                         as_u64(x[2]["block_hashes"][0]) == low64(first))
        self.assertEqual(len(got), 1, "first chunk never demoted to L2")
        rem = [x for x in s.events() if x[2]["type"] == "BlockRemoved" and
               as_u64(x[2]["block_hashes"][0]) == low64(first)]
        self.assertEqual([x[2]["medium"] for x in rem], ["CPU"])
        self.assertEqual(os.getxattr(node.path("tiers", first),
                                     "user.kvfs.tier"), b"l2")
        # promotion: read it back
        mark = len(s.msgs)
        with open(node.path("tiers", first), "rb") as f:
            self.assertEqual(len(f.read()), CHUNK)
        got = s.wait_for(lambda x: x[2]["type"] == "BlockStored" and
                         x[2]["medium"] == "CPU" and
                         as_u64(x[2]["block_hashes"][0]) == low64(first),
                         since=mark)
        self.assertEqual(len(got), 1, "no promotion event")
        rem = [x for x in s.events(mark) if x[2]["type"] == "BlockRemoved"
               and as_u64(x[2]["block_hashes"][0]) == low64(first)]
        self.assertEqual([x[2]["medium"] for x in rem], ["DISK"])
        # the node's view from events equals the files' tiers
        view = {}
        for _, _, e in s.events():
            for h in e.get("block_hashes", []):
                h = as_u64(h)
                if e["type"] == "BlockStored":
                    view.setdefault(h, set()).add(e["medium"])
                else:
                    view.get(h, set()).discard(e["medium"])
        for k in keys:
            tier = os.getxattr(node.path("tiers", k), "user.kvfs.tier")
            want = {b"l1": "CPU", b"l2": "DISK"}[tier]
            self.assertEqual(view.get(low64(k)), {want}, k)


class RestartTest(Base):
    def test_restart_announces_recovered(self):
        node = NODES["n2"]
        s = self.sub(node)
        mkns(node, "keep", tokens=32)
        keys = [newkey() for _ in range(5)]
        for k in keys:
            put(node, "keep", k)
        s.wait_for(lambda x: as_u64(x[2]["block_hashes"][0]) ==
                   low64(keys[-1]) if x[2]["type"] == "BlockStored"
                   else False)
        mark = len(s.msgs)
        self.assertEqual(node.umount(), 0)
        got = s.wait_for(lambda x: x[2]["type"] == "AllBlocksCleared" and
                         x[0] == "kv@n2@keep", since=mark)
        self.assertEqual(len(got), 1, "no AllBlocksCleared at unmount")
        s.close()
        node.mount()
        s2 = Sub(self.ctx, node.pub)
        self.addCleanup(s2.close)
        # the announcement went out before we could subscribe: replay it
        d = self.ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.setsockopt(zmq.RCVTIMEO, 5000)
        d.connect(node.rep)
        d.send_multipart([b"", (0).to_bytes(8, "big")])
        stored = {}
        first_seq = None
        while True:
            fr = d.recv_multipart()
            seq = int.from_bytes(fr[1], "big", signed=True)
            if seq == -1:
                break
            if first_seq is None:
                first_seq = seq
            for e in decode_batch(fr[2]):
                if e["type"] == "BlockStored":
                    stored[as_u64(e["block_hashes"][0])] = e
        d.close()
        self.assertEqual(first_seq, 0)  # a new daemon starts at 0
        for k in keys:
            self.assertIn(low64(k), stored)
            self.assertEqual(stored[low64(k)]["medium"], "DISK")
            # user.kvfs.chunk_tokens came back with the namespace
            self.assertEqual(stored[low64(k)]["block_size"], 32)
        self.assertEqual(os.getxattr(node.path("keep"),
                                     "user.kvfs.chunk_tokens"), b"32")


class SlowSubscriberTest(Base):
    def test_never_reading_subscriber(self):
        node = NODES["n1"]
        lazy = self.ctx.socket(zmq.SUB)
        lazy.setsockopt(zmq.SUBSCRIBE, b"")
        lazy.setsockopt(zmq.RCVHWM, 1)
        lazy.setsockopt(zmq.RCVBUF, 4096)
        lazy.setsockopt(zmq.LINGER, 0)
        lazy.connect(node.pub)
        self.addCleanup(lazy.close)
        s = self.sub(node)
        mkns(node, "lazy")
        keys = [newkey() for _ in range(300)]
        for k in keys:
            put(node, "lazy", k, data=b"y" * 4096)
            s.pump(0)
        got = s.wait_for(lambda x: x[2]["type"] == "BlockStored" and
                         as_u64(x[2]["block_hashes"][0]) == low64(keys[-1]))
        self.assertEqual(len(got), 1)
        seqs = [m[1] for m in s.msgs]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
        st = node.stats()["events"]
        self.assertEqual(st["dropped"], 0)


class ScoreTest(Base):
    def test_score_two_nodes(self):
        n1, n2 = NODES["n1"], NODES["n2"]
        chain = [newkey() for _ in range(8)]
        for n in (n1, n2):
            mkns(n, "score")
        chains = os.path.join(TMP, "chains")
        with open(chains, "w") as f:
            f.write(" ".join(chain) + "\n")
            f.write(" ".join(chain[:3]) + "\n")
        with open(chains) as cf:
            p = subprocess.Popen([CTL_BIN, "score", "--events",
                                  n1.pub + "," + n2.pub, "--warmup-ms",
                                  "3000"], stdin=cf, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        # wait for "listening", then write: n1 holds 5 leading, n2 2
        line = p.stderr.readline()
        self.assertIn("listening", line)
        time.sleep(0.3)
        for i, k in enumerate(chain[:5]):
            put(n1, "score", k, parent=chain[i - 1] if i else None)
        for k in chain[:2]:
            put(n2, "score", k)
        put(n2, "score", chain[3])   # a gap: not part of the run
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        rows = [dict(kv.split("=", 1) for kv in l.split())
                for l in out.splitlines()]
        by = {(r["chain"], r["node"]): r for r in rows}
        self.assertEqual(by[("1", "n1")]["run"], "5")
        self.assertEqual(by[("1", "n2")]["run"], "2")
        self.assertEqual(by[("2", "n1")]["run"], "3")
        self.assertEqual(by[("1", "n1")]["CPU"], "5")
        self.assertAlmostEqual(float(by[("1", "n1")]["score"]), 4.0)


class InotifyTest(unittest.TestCase):
    """Evictions reach stock tools: fuse_lowlevel_notify_delete.

    What Linux does with it (checked on 6.18): the evicted chunk's inode
    loses its links and its dentry is deleted, so a watch on the chunk
    reports DELETE_SELF; the namespace directory's watch gets no DELETE
    (the kernel's fuse_reverse_inval_entry calls d_delete, which stopped
    sending IN_DELETE to the parent in Linux 5.3). With the plain
    inval_entry kvfs used before, neither watch saw anything. An unlink
    through the mount gives DELETE on the directory, as on any filesystem.
    """

    def test_eviction_and_unlink(self):
        if not shutil.which("inotifywait"):
            self.skipTest("inotifywait missing (apt-get install inotify-tools)")
        node = Node("n3")   # no L2: an eviction leaves every tier
        node.opts = lambda: "l1_size=%d,max_chunk=%d" % (L1, CHUNK)
        node.mount()
        self.addCleanup(node.umount)
        mkns(node, "ino")
        first = newkey()
        put(node, "ino", first)
        os.stat(node.path("ino", first))   # the kernel knows its name
        w = subprocess.Popen(["inotifywait", "-m", "--format", "%e %f",
                              node.path("ino", first), node.path("ino")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.addCleanup(w.wait)
        self.addCleanup(w.kill)
        while "Watches established" not in w.stderr.readline():
            pass
        for _ in range(40):                # L1 holds 16: `first` goes
            put(node, "ino", newkey())
        self.assertFalse(os.path.exists(node.path("ino", first)))
        victim = newkey()
        put(node, "ino", victim)
        os.unlink(node.path("ino", victim))
        time.sleep(0.5)
        w.kill()
        out, _ = w.communicate()
        lines = out.splitlines()
        self.assertIn("DELETE_SELF ", lines, "no delete event for the "
                      "evicted chunk's watch: %r" % lines[-5:])
        self.assertIn("DELETE %s" % victim, lines)
        evicted_in_dir = "DELETE %s" % first in lines
        sys.stderr.write("inotify: eviction gives DELETE_SELF on the chunk"
                         "%s\n" % (", DELETE on the directory"
                                    if evicted_in_dir else
                                    "; no DELETE on the directory (this "
                                    "kernel)"))


class CtlEventsTest(Base):
    def test_kvfsctl_events_json_and_replay(self):
        import json
        node = NODES["n1"]
        s = self.sub(node)
        mkns(node, "ctl", tokens=8)
        keys = [newkey() for _ in range(3)]
        for k in keys:
            put(node, "ctl", k)
        os.unlink(node.path("ctl", keys[0]))
        got = s.wait_for(lambda x: x[2]["type"] == "BlockRemoved" and
                         as_u64(x[2]["block_hashes"][0]) == low64(keys[0]))
        first = [x for x in s.events() if x[2]["type"] == "BlockStored" and
                 as_u64(x[2]["block_hashes"][0]) == low64(keys[0])]
        start = first[0][1]       # batches may hold several events
        p = subprocess.run([CTL_BIN, "events", node.pub, "--json", "--from",
                            str(start), "--replay", node.rep,
                            "--duration-ms", "300"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(l) for l in p.stdout.splitlines()]
        mine = [l for l in lines if l.get("block_hashes") and
                l["block_hashes"][0] in [k[16:] for k in keys]]
        self.assertEqual([(l["type"], l["medium"]) for l in mine],
                         [("BlockStored", "CPU")] * 3 +
                         [("BlockRemoved", "CPU")])
        self.assertEqual([l["block_hashes"][0] for l in mine],
                         [k[16:] for k in keys] + [keys[0][16:]])
        self.assertTrue(all(l["replayed"] for l in mine))
        self.assertEqual(mine[0]["block_size"], 8)
        want = [x[1] for x in s.events() if x[0] == "kv@n1@ctl"]
        self.assertEqual([l["seq"] for l in mine], want)

    def test_kvfsctl_bad_input(self):
        p = subprocess.run([CTL_BIN, "events", "bogus://x"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn("bogus://x", p.stderr)
        p = subprocess.run([CTL_BIN, "events", NODES["n1"].pub, "--from",
                            "3"], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--replay", p.stderr)
        p = subprocess.run([CTL_BIN, "score", "--events", NODES["n1"].pub,
                            "--warmup-ms", "10"], input="nothex\n",
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn("bad key", p.stderr)
        p = subprocess.run([CTL_BIN, "score", "--events", NODES["n1"].pub,
                            "--weights", "TAPE=1"], input="",
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2)


class MediumTest(Base):
    """L1's medium: "GPU" for l1=cuda, "CPU" for pinned (and host), with
    the stand-in CUDA runtime of tests/gpu where there is no GPU."""

    def check(self, l1, want):
        build = os.environ.get("KVFS_BUILD", "build/asan")
        fake = os.environ.get("KVFS_FAKECUDART") or os.path.join(
            build if os.path.isabs(build) else os.path.join(REPO, build),
            "tests", "gpu", "libfakecudart.so")
        if not os.path.exists(fake):
            self.skipTest("no stand-in CUDA runtime at %s" % fake)
        node = Node("m-" + l1)
        node.opts = lambda: ("l1=%s,l1_size=32M,events=%s,node=g"
                             % (l1, node.pub))
        env = dict(os.environ, KVFS_CUDART=fake)
        env.pop("FAKECUDA_DEVICES", None)
        before = os.stat(node.mnt).st_dev
        node.proc = subprocess.Popen([MOUNT_BIN, "-f", "-o", node.opts(),
                                      node.mnt], env=env)
        self.addCleanup(node.umount)
        end = time.monotonic() + 30
        while os.stat(node.mnt).st_dev == before:
            if node.proc.poll() is not None:
                node.proc = None
                self.skipTest("l1=%s did not mount with the stand-in "
                              "runtime" % l1)
            self.assertLess(time.monotonic(), end)
            time.sleep(0.01)
        s = self.sub(node)
        mkns(node, "g")
        k = newkey()
        put(node, "g", k, data=b"z" * 4096)
        got = s.wait_for(lambda x: x[2]["type"] == "BlockStored" and
                         as_u64(x[2]["block_hashes"][0]) == low64(k))
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0][2]["medium"], want)

    def test_cuda_is_gpu(self):
        self.check("cuda", "GPU")

    def test_pinned_is_cpu(self):
        self.check("pinned", "CPU")


class BatchedPutTest(Base):
    def test_put_many_publishes_events(self):
        """The batched PUT ioctl (kvfs's put_many) publishes through
        the same engine path: one BlockStored per chunk."""
        plain = os.environ.get("KVFS_PLAIN_BUILD", "build")
        lib = os.path.join(plain if os.path.isabs(plain)
                           else os.path.join(REPO, plain), "libkvfs.so")
        if not os.path.exists(lib):
            self.skipTest("no %s (make all)" % lib)
        os.environ.setdefault("KVFS_LIB", lib)
        sys.path.insert(0, os.path.join(REPO, "python"))
        import kvfs
        node = NODES["n1"]
        s = self.sub(node)
        c = kvfs.Connector(node.mnt, "batched", chunk_tokens=4)
        try:
            keys = c.keys(range(4 * 6))
            try:
                res = list(c.put_many(keys, [b"q" * 1024] * len(keys)))
            except OSError as e:
                self.skipTest("no batched put here: %s" % e)
            self.assertEqual(res, [True] * len(keys))
        finally:
            c.close()
        want = {low64(kvfs.key_hex(k)) for k in keys}

        def stored():
            return {as_u64(x[2]["block_hashes"][0]) for x in s.events()
                    if x[0] == "kv@n1@batched" and
                    x[2]["type"] == "BlockStored"}
        end = time.monotonic() + 5
        while stored() != want and time.monotonic() < end:
            s.pump(50)
        self.assertEqual(stored(), want)


class BadInputTest(unittest.TestCase):
    def try_mount(self, opts):
        d = tempfile.mkdtemp(prefix="kvfs-evbad.", dir=TMP)
        p = subprocess.run([MOUNT_BIN, "-f", "-o", opts, d],
                           capture_output=True, text=True, timeout=60)
        self.assertFalse(_mounted(d))
        os.rmdir(d)
        return p

    def test_malformed_endpoint(self):
        p = self.try_mount("l1_size=16M,events=nonsense://x")
        self.assertEqual(p.returncode, 1)
        self.assertIn("nonsense://x", p.stderr)

    def test_port_taken(self):
        s = socket.socket()
        s.bind(("0.0.0.0", 0))
        s.listen(1)
        port = s.getsockname()[1]
        try:
            p = self.try_mount("l1_size=16M,events=tcp://*:%d" % port)
        finally:
            s.close()
        self.assertEqual(p.returncode, 1)
        self.assertIn("tcp://*:%d" % port, p.stderr)

    def test_bad_values(self):
        for o in ("events_format=xml", "events_hash=md5", "events_buffer=0",
                  "events_buffer=x", "node=a@b"):
            p = self.try_mount("l1_size=16M,events=ipc://%s/b.sock,%s" %
                               (TMP, o))
            self.assertEqual(p.returncode, 1, o)
            self.assertIn(o.split("=")[0], p.stderr)
        # events_* without events: refused rather than silently ignored
        p = self.try_mount("l1_size=16M,events_replay=ipc://%s/r.sock" % TMP)
        self.assertEqual(p.returncode, 1)

    def test_daemon_mode_failure(self):
        """Without -f the parent reports the child's failure: exit 1."""
        d = tempfile.mkdtemp(prefix="kvfs-evbad.", dir=TMP)
        p = subprocess.run([MOUNT_BIN, "-o", "l1_size=16M,events=tcp://*:x",
                            d], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("events=tcp://*:x", p.stderr)
        self.assertFalse(_mounted(d))
        os.rmdir(d)

    def test_connect_mode(self):
        """An endpoint without '*' is connected to: here, a router's SUB
        bound on an ephemeral loopback port."""
        ctx = zmq.Context()
        s = ctx.socket(zmq.SUB)
        s.setsockopt(zmq.SUBSCRIBE, b"kv@")
        s.setsockopt(zmq.LINGER, 0)
        port = s.bind_to_random_port("tcp://127.0.0.1")
        node = Node("n4")
        node.opts = lambda: ("l1_size=16M,events=tcp://127.0.0.1:%d,node=n4"
                             % port)
        node.mount()
        try:
            end = time.monotonic() + 10
            fr = None
            i = 0
            while fr is None and time.monotonic() < end:
                i += 1
                mkns(node, "c%d" % i)     # retried: the connection is async
                os.rmdir(node.path("c%d" % i))   # AllBlocksCleared
                if s.poll(200):
                    fr = s.recv_multipart()
            self.assertIsNotNone(fr, "no events through a connected PUB")
            self.assertTrue(fr[0].decode().startswith("kv@n4@"))
        finally:
            self.assertEqual(node.umount(), 0)
            s.close()
            ctx.term()

    def test_chunk_tokens_xattr(self):
        import errno
        node = NODES["n1"]
        mkns(node, "tok")
        self.addCleanup(os.rmdir, node.path("tok"))
        d = node.path("tok")
        self.assertEqual(os.getxattr(d, "user.kvfs.chunk_tokens"), b"0")
        self.assertIn("user.kvfs.chunk_tokens", os.listxattr(d))
        for bad in (b"abc", b"-1", b"4294967296", b"1.5", b""):
            with self.assertRaises(OSError) as cm:
                os.setxattr(d, "user.kvfs.chunk_tokens", bad)
            self.assertEqual(cm.exception.errno, errno.EINVAL, bad)
        os.setxattr(d, "user.kvfs.chunk_tokens", b"4294967295")
        self.assertEqual(os.getxattr(d, "user.kvfs.chunk_tokens"),
                         b"4294967295")
        with self.assertRaises(OSError) as cm:
            os.removexattr(d, "user.kvfs.chunk_tokens")
        self.assertEqual(cm.exception.errno, errno.EPERM)

    def test_ipc_socket_mode(self):
        st = os.stat(NODES["n1"].pub[len("ipc://"):])
        self.assertEqual(st.st_mode & 0o777, 0o600)
        self.assertEqual(st.st_uid, os.getuid())

    def test_replay_garbage_counted(self):
        node = NODES["n1"]
        ctx = zmq.Context()
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.connect(node.rep)
        before = node.stats()["events"]["replay_bad"]
        d.send_multipart([b"", b"short"])
        d.send_multipart([b"", b"12345678", b"extra"])
        d.send_multipart([b"x", b"12345678"])
        end = time.monotonic() + 5
        while time.monotonic() < end:
            if node.stats()["events"]["replay_bad"] >= before + 3:
                break
            time.sleep(0.05)
        self.assertEqual(node.stats()["events"]["replay_bad"], before + 3)
        d.close()
        ctx.term()
        os.mkdir(node.path("alive"))    # the daemon is unaffected
        os.rmdir(node.path("alive"))

    def test_replay_flood(self):
        """A flood of replay requests: served at the rate limit, the rest
        ignored and counted; writes and events go on."""
        node = NODES["n1"]
        ctx = zmq.Context()
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.setsockopt(zmq.SNDHWM, 0)
        d.connect(node.rep)
        before = node.stats()["events"]
        for _ in range(3000):
            d.send_multipart([b"", (0).to_bytes(8, "big")])
        mkns(node, "flood")
        put(node, "flood", newkey())
        end = time.monotonic() + 10
        while time.monotonic() < end:
            st = node.stats()["events"]
            if (st["replay_requests"] + st["replay_limited"] -
                    before["replay_requests"] - before["replay_limited"]
                    >= 3000):
                break
            time.sleep(0.05)
        st = node.stats()["events"]
        served = st["replay_requests"] - before["replay_requests"]
        limited = st["replay_limited"] - before["replay_limited"]
        self.assertEqual(served + limited, 3000)
        self.assertGreater(limited, 2000)
        self.assertLess(served, 400)
        while (node.stats()["events"]["published"] <= before["published"]
               and time.monotonic() < end):
            time.sleep(0.05)        # the put's event: sent all the same
        self.assertGreater(node.stats()["events"]["published"],
                           before["published"])
        d.close()
        ctx.term()


if __name__ == "__main__":
    unittest.main()
