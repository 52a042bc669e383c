#!/usr/bin/python3
"""KV events of L3 (medium REMOTE), end to end: a real redis-server on a
free loopback port and two kvfs mounts sharing it, a real ZeroMQ
subscriber on each (test_events.py's, llm-d's decoding).

  - a chunk A stores in L3: BlockStored(REMOTE) once the write succeeded,
    with its parent
  - a chunk leaving A's L1 while L3 keeps it: only BlockRemoved(CPU)
  - a promotion from L3: BlockStored(CPU), no new REMOTE event
  - unlink of a chunk in L3: BlockRemoved(CPU) and BlockRemoved(REMOTE)
  - a corrupt value in L3, read by B: dropped, BlockRemoved(REMOTE) on B

Run with /usr/bin/python3. Exit 77 when redis-server, the Python modules
or the daemon are missing.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_events as te  # noqa: E402 (exits 77 itself when it must)
from pathmount import free_port  # noqa: E402

if not shutil.which("redis-server") or not shutil.which("redis-cli"):
    print("skip: redis-server/redis-cli not installed (make deps)")
    sys.exit(77)

REDIS = {}


def cli(*args):
    return subprocess.run(["redis-cli", "-p", str(REDIS["port"])] +
                          list(args), capture_output=True, text=True,
                          timeout=10).stdout.strip()


class L3Node(te.Node):
    """No L2: a chunk leaving L1 is in L3 only."""

    def opts(self):
        return ("l1_size=%d,max_chunk=%d,events=%s,events_replay=%s,node=%s,"
                "l3=redis://127.0.0.1:%d,%s" %
                (te.L1, te.CHUNK, self.pub, self.rep, self.name,
                 REDIS["port"], self.extra))


def setUpModule():
    te.TMP = tempfile.mkdtemp(prefix="kvfs-evl3.")
    atexit.register(tearDownModule)
    for _ in range(5):
        REDIS["port"] = free_port()
        REDIS["proc"] = subprocess.Popen(
            ["redis-server", "--port", str(REDIS["port"]), "--bind",
             "127.0.0.1", "--dir", te.TMP, "--save", "", "--appendonly",
             "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 10
        while time.monotonic() < end and REDIS["proc"].poll() is None:
            if cli("PING") == "PONG":
                break
            time.sleep(0.05)
        if REDIS["proc"].poll() is None and cli("PING") == "PONG":
            break
        REDIS["proc"].kill()  # port taken meanwhile: another one
        REDIS["proc"].wait()
    else:
        raise RuntimeError("redis-server did not start")
    te.NODES["a"] = L3Node("a", "l3_ingest=all")
    te.NODES["b"] = L3Node("b", "l3_ingest=evicted")
    for n in te.NODES.values():
        n.mount()


def tearDownModule():
    te.cleanup()
    if REDIS.get("proc"):
        REDIS.pop("proc").kill()


def of(events, typ, medium, key):
    return [e for _, _, e in events if e["type"] == typ and
            e.get("medium") == medium and
            te.low64(key) in [te.as_u64(h) for h in e["block_hashes"]]]


class L3EventsTest(te.Base):
    def wait_ev(self, s, typ, medium, key, ms=10000):
        got = s.wait_for(lambda x: bool(of([x], typ, medium, key)), ms=ms)
        self.assertTrue(got, "no %s(%s) of %s" % (typ, medium, key))
        return got[0][2]

    def test_stored_evicted_promoted_unlinked(self):
        a, b = te.NODES["a"], te.NODES["b"]
        sa = self.sub(a)
        ns = "l3ev"
        te.mkns(a, ns, 16)
        k1, k2 = te.newkey(), te.newkey()
        te.put(a, ns, k1)
        te.put(a, ns, k2, parent=k1)
        self.wait_ev(sa, "BlockStored", "CPU", k2)
        e = self.wait_ev(sa, "BlockStored", "REMOTE", k2)
        self.assertEqual(te.as_u64(e["parent_block_hash"]), te.low64(k1))
        self.assertEqual(e["block_size"], 16)
        self.wait_ev(sa, "BlockStored", "REMOTE", k1)
        self.assertEqual(cli("EXISTS", "kvfs:%s:%s" % (ns, k2)), "1")

        # fill L1 (16 chunks): k1, k2 leave it; L3 keeps them
        more = [te.newkey() for _ in range(24)]
        for k in more:
            te.put(a, ns, k)
        self.wait_ev(sa, "BlockStored", "REMOTE", more[-1])
        self.wait_ev(sa, "BlockRemoved", "CPU", k1)
        sa.pump(300)
        self.assertFalse(of(sa.events(), "BlockRemoved", "REMOTE", k1))
        self.assertFalse(of(sa.events(), "BlockRemoved", "REMOTE", k2))

        # a promotion from L3 back into A's L1: CPU only
        mark = len(sa.msgs)
        with open(a.path(ns, k1), "rb") as f:
            self.assertEqual(len(f.read()), te.CHUNK)
        self.wait_ev(sa, "BlockStored", "CPU", k1)
        sa.pump(300)
        self.assertFalse(of(sa.events(mark), "BlockStored", "REMOTE", k1))

        # unlink: CPU (where it is now) and REMOTE, and gone from Redis
        mark = len(sa.msgs)
        os.unlink(a.path(ns, k1))
        self.wait_ev(sa, "BlockRemoved", "CPU", k1)
        self.wait_ev(sa, "BlockRemoved", "REMOTE", k1)
        self.assertFalse(of(sa.events(mark), "BlockStored", "REMOTE", k1))
        end = time.monotonic() + 5
        while time.monotonic() < end and \
                cli("EXISTS", "kvfs:%s:%s" % (ns, k1)) != "0":
            time.sleep(0.05)
        self.assertEqual(cli("EXISTS", "kvfs:%s:%s" % (ns, k1)), "0")

    def test_corrupt_value_dropped(self):
        a, b = te.NODES["a"], te.NODES["b"]
        sa, sb = self.sub(a), self.sub(b)
        ns = "l3bad"
        te.mkns(a, ns)
        k = te.newkey()
        te.put(a, ns, k)
        self.wait_ev(sa, "BlockStored", "REMOTE", k)
        cli("SET", "kvfs:%s:%s" % (ns, k), "not a kvfs record")
        te.mkns(b, ns)
        with self.assertRaises(FileNotFoundError):
            open(b.path(ns, k), "rb").close()
        self.wait_ev(sb, "BlockRemoved", "REMOTE", k)
        sb.pump(200)
        self.assertFalse(of(sb.events(), "BlockStored", "CPU", k))
        self.assertEqual(cli("EXISTS", "kvfs:%s:%s" % (ns, k)), "0")


if __name__ == "__main__":
    unittest.main()
