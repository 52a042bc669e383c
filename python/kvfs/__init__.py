"""kvfs - Python binding for kvfs, the FUSE-mounted KV-cache filesystem.

Standard library only. Prefix keys are computed by libkvfs.so through
ctypes, found by $KVFS_LIB (only that path when set), then the test
suite's $KVFS_PLAIN_BUILD, then the library `make install` installed with
this package, then, in a source tree, the repository's build/, then the
system's loader (ldconfig's cache, libkvfs.so.0); everything else is
plain os / fcntl / mmap on the mount, with the ioctl argument structs
mirrored by ctypes.Structure so they are laid out exactly like
include/kvfs.h (in kvfs/_abi.py; the code is in kvfs/_client.py, the
zero-copy handles in kvfs/_handle.py, kvfs.buffer in kvfs/_buffer.py;
this package re-exports them).

    import kvfs
    conn = kvfs.Connector("/mnt/kvfs", "llama3-8b.bf16.tp1.r0",
                          chunk_tokens=256)
    keys = conn.keys(token_ids)               # one key per full chunk
    res = conn.lookup(keys, pin=True)         # leading run cached
    for k in keys[:res.found]:
        conn.get(k, out=buffer_for(k))        # one ioctl into the engine's buffer
    conn.release(res)
    for k in keys[res.found:]:
        conn.put(k, kv_bytes_for(k))          # bytes / memoryview / numpy
    conn.close()

Keys are 16-byte `bytes` (the canonical form); every function that takes
a key also accepts its 32-digit lowercase hex name.

Misses are reported one way: a key that is not cached is never an
exception. get, get_mmap, handle and stat return None, exists returns
False, delete returns False, get_many gives None in that key's slot, and
contains / lookup count the leading run found. Everything else that goes
wrong raises.

Errors: from the mount, OSError (or its subclass for the errno, e.g.
PermissionError) with the errno the daemon gave and a message naming what
the caller did: the operation, namespace and key ("put ns/<key>: ..."),
or the lease ("unpin lease 42: ..."), never a temporary name of the
module's own. A Connector on a directory that is not the root of a kvfs
mount raises NotKvfsMountError before it creates anything. Bad arguments
raise ValueError or TypeError before anything reaches the mount.

Async: put_async, get_async, put_many_async and get_many_async return
concurrent.futures.Future objects run by the connector's small thread pool
(`workers` threads, started on first use; close() waits for them), as the
offload connectors of LMCache and vLLM expect. The syscalls and ctypes
calls release the GIL, so transfers overlap.

Installed by `make install` (the package directory kvfs/ into Debian's
python3 dist-packages for PREFIX=/usr or /usr/local; elsewhere put
$PREFIX/lib/python3.X/dist-packages on PYTHONPATH); that copy loads
$PREFIX/lib/libkvfs.so.0. `pip install ./python` (python/pyproject.toml,
setuptools, no dependencies) installs it into a virtual environment or a
user's site; that copy finds libkvfs by $KVFS_LIB or the system's loader.
"""

from ._client import *  # noqa: F401,F403 (the binding's public names)
from ._client import __all__  # noqa: F401
# transfer buffers in huge pages (kvfs_buf_alloc's Python side)
from ._buffer import buffer, HUGE_PAGE  # noqa: F401
__all__ = __all__ + ["buffer", "HUGE_PAGE"]
# the raw ioctl call, for tests and tools that build their own arguments
from ._abi import _ioctl  # noqa: F401
