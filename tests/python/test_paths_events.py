#!/usr/bin/python3
"""KV events of path namespaces: a file whose name begins with at least 16
hex digits (vLLM's "<sha256 hex>.bin", SGLang's "<sha256 hex>_...") is
reported with the low 64 bits of the number those digits spell as its
block hash, so a router that knows the engine's block hashes scores the
engine's own disk tier; other files (config.json) with their key's, as key
chunks. A real ZeroMQ subscriber (python3-zmq, python3-msgpack) on the
mount's PUB socket.
"""
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

pathmount.need("daemon")
try:
    import msgpack
    import zmq
except ImportError as e:
    print("skip: %s (Debian: python3-zmq python3-msgpack)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.join(pathmount.REPO, "python"))
if "KVFS_LIB" not in os.environ and os.path.exists(
        os.path.join(pathmount.PLAIN, "libkvfs.so")):
    os.environ["KVFS_LIB"] = os.path.join(pathmount.PLAIN, "libkvfs.so")
import kvfs  # noqa: E402

M = None
SOCK = None


def setUpModule():
    global M, SOCK
    SOCK = tempfile.mkdtemp(prefix="kvfs-paths-ev.")
    M = pathmount.new_mount(["names=paths", "l1_size=16M", "max_chunk=4M",
                             "events=ipc://%s/pub.sock" % SOCK], l2=False)


def tearDownModule():
    pathmount.drop_mount(M)
    try:
        os.rmdir(SOCK)
    except OSError:
        pass


def events(sub, ms=3000, until=None):
    got = []
    end = time.monotonic() + ms / 1000.0
    while time.monotonic() < end:
        if not sub.poll(50):
            if until and until(got):
                return got
            continue
        topic, seq, payload = sub.recv_multipart()
        ts, evs, _ = msgpack.unpackb(payload, raw=False)
        for e in evs:
            got.append((topic.decode(), e if isinstance(e, dict) else
                        {"type": e[0], "block_hashes": e[1]}))
        if until and until(got):
            return got
    return got


class PathEvents(unittest.TestCase):
    def test_hex_names_report_the_engines_hash(self):
        ctx = zmq.Context()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect("ipc://%s/pub.sock" % SOCK)
        time.sleep(0.3)  # the subscription reaches the PUB
        ns = os.path.join(M.mnt, "ev")
        os.mkdir(ns)
        h = "00112233445566778899aabbccddeeff" \
            "fedcba9876543210" "0123456789abcdef"
        rel = "m_0a1b2c3d4e5f_r0/001/12_g0/%s.bin" % h
        dest = os.path.join(ns, rel)
        os.makedirs(os.path.dirname(dest))
        tmp = dest + "_42.tmp"
        with open(tmp, "wb") as f:
            f.write(b"kv" * 1000)
        os.replace(tmp, dest)
        with open(os.path.join(ns, "config.json"), "w") as f:
            f.write("{}")
        want = int(h[-16:], 16)
        cfg = int.from_bytes(kvfs.path_key("config.json")[8:], "big")

        def stored(got):
            hs = [e["block_hashes"][0] for _, e in got
                  if e["type"] == "BlockStored"]
            return want in hs and cfg in hs
        got = events(sub, until=stored)
        stored_hashes = [e["block_hashes"][0] for t, e in got
                         if e["type"] == "BlockStored"]
        self.assertIn(want, stored_hashes)
        self.assertIn(cfg, stored_hashes)
        # the temporary was never published: no event names its key
        tmpkey = int.from_bytes(kvfs.path_key(rel + "_42.tmp")[8:], "big")
        self.assertNotIn(tmpkey, stored_hashes)
        self.assertTrue(all(t == "kv@%s@ev" % t.split("@")[1]
                            for t, _ in got))
        os.unlink(dest)
        got = events(sub, until=lambda g: any(
            e["type"] == "BlockRemoved" for _, e in g))
        removed = [e["block_hashes"][0] for _, e in got
                   if e["type"] == "BlockRemoved"]
        self.assertEqual(removed, [want])
        sub.close()
        ctx.term()


if __name__ == "__main__":
    unittest.main()
