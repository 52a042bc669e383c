"""kvfs._client - the binding's code: libkvfs through ctypes (keys), and
the Connector on a mount (plain os / fcntl / mmap). The package's
__init__.py re-exports its public names and documents them; import kvfs,
not this module.
"""


import ctypes
import ctypes.util
import errno as _errno
import mmap
import operator
import os
import stat as _stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "ABI_VERSION", "LOOKUP_MAX", "GROUP_MAX", "GROUP_KEYS_MAX",
    "LOOKUP_PIN", "LOOKUP_PREFETCH", "HANDLE_HOST_MMAP", "HANDLE_CUDA_IPC",
    "Key", "LookupArg", "GroupLookupArg", "UnpinArg", "HandleArg",
    "HandleReleaseArg", "IOC_LOOKUP", "IOC_GROUP_LOOKUP", "IOC_UNPIN",
    "IOC_HANDLE", "IOC_HANDLE_RELEASE", "LookupResult",
    "MissingNamespaceError", "NotKvfsMountError", "Handle", "Connector",
    "keys", "key_chunk", "DTYPES",
    "key_hex", "parse_key", "load_library", "XFER_MAX", "IoArg",
    "NS_NAME_MAX", "CudaMapArg", "CudaMapping", "cuda_probe", "path_keys",
    "path_key",
    "LOOKUP_WAIT", "layer_keys",
]

# the ABI (ioctl numbers, argument structs): _abi.py, beside this file
from ._abi import (  # noqa: F401 (re-exported)
    ABI_VERSION, LOOKUP_MAX, GROUP_MAX, GROUP_KEYS_MAX,
    NS_NAME_MAX, LOOKUP_PIN, LOOKUP_PREFETCH, HANDLE_HOST_MMAP,
    HANDLE_CUDA_IPC, Key, LookupArg, GroupLookupArg, UnpinArg, HandleArg,
    CudaMapArg, HandleReleaseArg, XFER_MAX, IoArg, _Views, IOC_LOOKUP,
    IOC_GROUP_LOOKUP, IOC_UNPIN, IOC_HANDLE, IOC_HANDLE_RELEASE, _ioctl,
    LOOKUP_WAIT, LAYER_TAG, wait_deadline, ioctl_wait, LOOKUP_KEYS_AT,
    LOOKUP_AT_MAX,
)
# zero-copy handles on one chunk (Connector.handle): _handle.py
from ._handle import Handle, CudaMapping, cuda_probe  # noqa: F401,E402


# ------------------------------------------------------------ libkvfs
_lib = None
_lib_lock = threading.Lock()
# the library `make install` put beside this package (make install
# rewrites this line in the installed copy)
_INSTALLED_LIB = None


def _candidates():
    env = os.environ.get("KVFS_LIB")
    if env:
        yield env
        return
    # python/kvfs/_client.py in a source tree: the repository is two up
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    plain = os.environ.get("KVFS_PLAIN_BUILD")
    if plain:
        yield os.path.join(plain if os.path.isabs(plain)
                           else os.path.join(repo, plain), "libkvfs.so")
    if _INSTALLED_LIB:
        yield _INSTALLED_LIB
    if os.path.exists(os.path.join(repo, "include", "kvfs.h")):
        yield os.path.join(repo, "build", "libkvfs.so")  # a source tree
    found = ctypes.util.find_library("kvfs")
    if found:
        yield found
    yield "libkvfs.so.0"
    yield "libkvfs.so"


def load_library():
    """Loads libkvfs.so (once) and returns the ctypes handle.

    Raises OSError naming the places it looked when none loads. When
    KVFS_LIB is set only that path is tried.
    """
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append(path + " (missing)")
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                continue
            lib.kvfs_key_chunk.argtypes = [
                ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                ctypes.c_void_p]
            lib.kvfs_key_chunk.restype = ctypes.c_int
            lib.kvfs_keys.argtypes = [
                ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint32,
                ctypes.c_void_p, ctypes.c_size_t]
            lib.kvfs_keys.restype = ctypes.c_long
            lib.kvfs_path_keys.argtypes = [
                ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                ctypes.c_void_p]
            lib.kvfs_path_keys.restype = ctypes.c_long
            lib.kvfs_cuda_probe.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            lib.kvfs_cuda_probe.restype = ctypes.c_int
            lib.kvfs_cuda_open.argtypes = [
                ctypes.POINTER(HandleArg), ctypes.c_int,
                ctypes.POINTER(CudaMapArg)]
            lib.kvfs_cuda_open.restype = ctypes.c_int
            lib.kvfs_cuda_close.argtypes = [ctypes.POINTER(CudaMapArg)]
            lib.kvfs_cuda_close.restype = ctypes.c_int
            if hasattr(lib, "kvfs_mget"):  # batched transfers
                lib.kvfs_mget.argtypes = [ctypes.c_int,
                                          ctypes.POINTER(IoArg),
                                          ctypes.c_size_t, ctypes.c_uint]
                lib.kvfs_mget.restype = ctypes.c_long
                lib.kvfs_mput.argtypes = [ctypes.c_int,
                                          ctypes.POINTER(IoArg),
                                          ctypes.c_size_t]
                lib.kvfs_mput.restype = ctypes.c_long
            if hasattr(lib, "kvfs_mget_wait"):  # libkvfs 0.2
                lib.kvfs_mget_wait.argtypes = [
                    ctypes.c_int, ctypes.POINTER(IoArg), ctypes.c_size_t,
                    ctypes.c_uint, ctypes.c_uint32]
                lib.kvfs_mget_wait.restype = ctypes.c_long
            _lib = lib
            return lib
        raise OSError(_errno.ENOENT,
                      "libkvfs.so not found (set KVFS_LIB); tried: " +
                      "; ".join(tried))


def _token_array(tokens):
    """tokens as a contiguous array of uint32 (list, range, array.array,
    bytes-like of uint32, or a numpy integer array)."""
    if hasattr(tokens, "dtype") and hasattr(tokens, "astype"):  # numpy
        import numpy as np
        a = np.ascontiguousarray(tokens)
        if a.ndim != 1:
            raise ValueError("tokens must be one-dimensional")
        if a.size and (a.min() < 0 or a.max() > 0xFFFFFFFF):
            raise ValueError("token ids must be in 0..4294967295")
        a = np.ascontiguousarray(a.astype("<u4", copy=False))
        return (ctypes.c_uint32 * a.size).from_buffer_copy(a), int(a.size)
    seq = list(tokens)
    for t in seq:
        if not isinstance(t, int) or isinstance(t, bool):
            raise TypeError("token ids must be ints, got %r" % (t,))
        if t < 0 or t > 0xFFFFFFFF:
            raise ValueError("token id %d out of range 0..4294967295" % t)
    return (ctypes.c_uint32 * len(seq))(*seq), len(seq)


def _extra_bytes(extra):
    if extra is None:
        return b""
    if isinstance(extra, str):
        return extra.encode()
    return bytes(extra)


def keys(tokens, chunk_tokens, seed=0, extra=b""):
    """The chained keys (16-byte bytes each) of every complete chunk of
    chunk_tokens tokens; a trailing partial chunk gets no key."""
    if not isinstance(chunk_tokens, int) or chunk_tokens <= 0:
        raise ValueError("chunk_tokens must be a positive int")
    if not isinstance(seed, int) or seed < 0 or seed >= 1 << 64:
        raise ValueError("seed must be in 0..2**64-1")
    arr, n = _token_array(tokens)
    e = _extra_bytes(extra)
    nk = n // chunk_tokens
    if nk == 0:
        return []
    out = (Key * nk)()
    ebuf = ctypes.create_string_buffer(e, len(e)) if e else None
    rc = load_library().kvfs_keys(arr, n, chunk_tokens, seed, ebuf, len(e),
                                  out, nk)
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc))
    return [bytes(out[i].b) for i in range(rc)]


def layer_keys(tokens, chunk_tokens, layer, seed=0, extra=b""):
    """keys() of one layer's chain (kvfs_layer_keys): extra followed by
    b"kvfs.layer" and the layer as 4 bytes little-endian."""
    if not isinstance(layer, int) or layer < 0 or layer >= 1 << 32:
        raise ValueError("layer must be in 0..2**32-1")
    return keys(tokens, chunk_tokens, seed, _extra_bytes(extra) + LAYER_TAG +
                layer.to_bytes(4, "little"))


def key_chunk(prev, tokens, seed=0, extra=b""):
    """The key of one chunk chained on prev (None for the first chunk)."""
    arr, n = _token_array(tokens)
    e = _extra_bytes(extra)
    out = Key()
    p = None
    if prev is not None:
        p = Key()
        p.b[:] = parse_key(prev)
    ebuf = ctypes.create_string_buffer(e, len(e)) if e else None
    rc = load_library().kvfs_key_chunk(
        ctypes.byref(p) if p is not None else None, seed, ebuf, len(e),
        arr, n, ctypes.byref(out))
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc))
    return bytes(out.b)


def path_keys(paths):
    """The keys (16 bytes each) of files of a path namespace: XXH3-128 of
    each path below the namespace ("a/b/c.bin", str or bytes; kvfs(7)).
    Look them up with Connector.lookup like any keys. Raises ValueError for
    a path that is empty, absolute, or has an empty, "." or ".."
    component, OSError(ENAMETOOLONG) past 1024 bytes."""
    raw = [p.encode() if isinstance(p, str) else bytes(p) for p in paths]
    if not raw:
        return []
    if any(b"\0" in p for p in raw):
        raise ValueError("a path has no NUL bytes")
    arr = (ctypes.c_char_p * len(raw))(*raw)
    out = (Key * len(raw))()
    rc = load_library().kvfs_path_keys(arr, len(raw), out)
    if rc == -_errno.EINVAL:
        raise ValueError("not a canonical path below a namespace")
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc))
    return [bytes(out[i].b) for i in range(len(raw))]


def path_key(path):
    """The key of one file of a path namespace (see path_keys)."""
    return path_keys([path])[0]


_HEX = frozenset("0123456789abcdef")


def parse_key(k):
    """A key as 16 bytes, from 16 bytes or a 32-digit lowercase hex name."""
    if isinstance(k, str):
        if len(k) != 32 or not set(k) <= _HEX:
            raise ValueError("a key name is 32 lowercase hex digits: %r" % k)
        return bytes.fromhex(k)
    if isinstance(k, (bytes, bytearray, memoryview)):
        b = bytes(k)
        if len(b) != 16:
            raise ValueError("a key is 16 bytes, got %d" % len(b))
        return b
    raise TypeError("a key is 16 bytes or 32 hex digits, got %s"
                    % type(k).__name__)


def _u64(v, name):
    """v as an unsigned 64-bit field of a transfer entry: an integer
    (TypeError for a float or a str, which int() would cut or parse),
    ValueError for a negative value or one past 2**64 - 1 (ctypes would
    cut it silently)."""
    v = operator.index(v)
    if v < 0 or v >= 1 << 64:
        raise ValueError("%s: %d is not in 0..2**64-1" % (name, v))
    return v


def _check_depths(depth_base, nkeys):
    """depth_base an integer whose chain of nkeys depths fits 32 bits
    (the daemon's EINVAL, said here: ctypes would cut it)."""
    depth_base = operator.index(depth_base)
    if depth_base < 0 or depth_base + nkeys > 0xFFFFFFFF:
        raise ValueError("depth_base %d with %d keys: past 2**32 - 1"
                         % (depth_base, nkeys))


def _key_chain(keys):
    """keys (any iterable of what parse_key takes) as one bytes object of
    16 bytes per key. A list of 16-byte bytes objects, what keys() and
    layer_keys() return, is joined at once (1,024 parse_key calls cost
    about 270 us here, twice the lookup's round trip)."""
    if not isinstance(keys, (list, tuple)):
        keys = list(keys)
    # only bytes objects (len() is their byte count), each 16 bytes
    if keys and set(map(type, keys)) == {bytes} and \
            min(map(len, keys)) == 16 == max(map(len, keys)):
        return b"".join(keys)
    return b"".join([parse_key(k) for k in keys])


def key_hex(k):
    """The file name of a key: 32 lowercase hex digits."""
    return parse_key(k).hex()


# Set once a daemon refused a chain by address (EPERM or ESRCH: it may not
# read this process's memory; EINVAL: it is older than the flag): from then
# on lookups carry their keys inside the struct, KVFS_LOOKUP_MAX at a time.
_keys_at_refused = False


# Set once Connector.get(key, out) could not use KVFS_IOC_GET in this
# process (no libkvfs with kvfs_mget, or the daemon may not write this
# process's memory): from then on it reads through the file.
_get_by_ioctl_refused = False
_BY_FILE = object()


def _refuse_keys_at():
    global _keys_at_refused
    _keys_at_refused = True


def _lease_ms(ms):
    """A lease time in ms for the ioctl's uint32 (0 = the mount's)."""
    ms = int(ms)
    if not 0 <= ms <= 0xFFFFFFFF:
        raise ValueError("lease_ms must be 0..2**32-1, got %d" % ms)
    return ms


def _check_ns(name):
    if not isinstance(name, str):
        raise TypeError("a namespace name is a str")
    b = name.encode()
    if not b or len(b) > NS_NAME_MAX or "/" in name or name.startswith(".") \
            or "\0" in name:
        raise ValueError("bad namespace name %r" % name)
    return b


def _byte_view(buf, writable=False):
    """A flat unsigned-byte memoryview over a buffer object (bytes,
    bytearray, memoryview, array.array, mmap, numpy array...)."""
    try:
        mv = memoryview(buf)
    except TypeError:
        raise TypeError("expected a buffer object, got %s"
                        % type(buf).__name__) from None
    if writable and mv.readonly:
        raise TypeError("the output buffer is read-only")
    if not mv.c_contiguous:
        raise ValueError("the buffer must be C-contiguous")
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


# ------------------------------------------------------------ results
class LookupResult:
    """found: leading run cached (in every namespace for a group);
    in_l1 / in_l2 / in_l3: of those, in which tier (in_l3: found only in
    the shared L3 tier; group: not reported, 0);
    leases: lease ids holding the run pinned (PIN only)."""
    __slots__ = ("found", "in_l1", "in_l2", "in_l3", "leases")

    def __init__(self, found=0, in_l1=0, in_l2=0, leases=None, in_l3=0):
        self.found = found
        self.in_l1 = in_l1
        self.in_l2 = in_l2
        self.in_l3 = in_l3
        self.leases = leases if leases is not None else []

    def __repr__(self):
        return ("LookupResult(found=%d, in_l1=%d, in_l2=%d, in_l3=%d, "
                "leases=%r)" % (self.found, self.in_l1, self.in_l2,
                                self.in_l3, self.leases))


class NotKvfsMountError(OSError):
    """Connector(mountpoint) names a directory that is not the root of a
    kvfs mount (errno ENODEV, .filename the path given)."""

    def __init__(self, path, why):
        super().__init__(_errno.ENODEV, "not the root of a kvfs mount (%s)"
                         % why, path)


def _size(fd):
    """The size of the open chunk fd, its offset left at 0. lseek, not
    fstat: the kernel marks a FUSE file's atime stale after every read, so
    an fstat of a chunk read before is a GETATTR round trip to the daemon;
    SEEK_END asks the kernel for the size alone, cached with the name."""
    size = os.lseek(fd, 0, os.SEEK_END)
    os.lseek(fd, 0, os.SEEK_SET)
    return size


def _kvfs_mount_root(fd):
    """True when fd is the root directory of a fuse.kvfs mount (by
    /proc/self/mountinfo: fs type, device, and the FUSE root inode 1)."""
    st = os.fstat(fd)
    if st.st_ino != 1:
        return False
    try:
        with open("/proc/self/mountinfo", encoding="utf-8",
                  errors="replace") as f:
            for line in f:
                head, sep, tail = line.partition(" - ")
                fields = head.split()
                if not sep or len(fields) < 5 or not tail:
                    continue
                major, _, minor = fields[2].partition(":")
                if (tail.split()[0] == "fuse.kvfs" and fields[3] == "/" and
                        os.makedev(int(major), int(minor)) == st.st_dev):
                    return True
    except (OSError, ValueError):
        pass
    return False


def _oserror(e, what):
    """e (an OSError) again, its message naming what the caller did
    instead of the file name of a syscall; the class follows the errno
    (FileExistsError, PermissionError...)."""
    if not e.errno:
        return e
    return OSError(e.errno, "%s: %s" % (what, os.strerror(e.errno)))


def _neg_error(rc, what):
    """A -errno result of libkvfs as an OSError naming what was done."""
    return OSError(-rc, "%s: %s" % (what, os.strerror(-rc)))


# user.kvfs.dtype values, and the names numpy / torch give the same types
DTYPES = ("bf16", "fp16", "fp32", "fp8")
_DTYPE_ALIAS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                "float32": "fp32", "float": "fp32", "float8_e4m3fn": "fp8",
                "float8_e4m3fnuz": "fp8", "float8_e5m2": "fp8",
                "float8_e5m2fnuz": "fp8"}


def _dtype_name(dtype):
    """dtype as user.kvfs.dtype wants it: bf16, fp16, fp32 or fp8, from
    that name, a numpy dtype, a torch dtype or their names."""
    name = str(getattr(dtype, "name", None) or
               getattr(dtype, "__name__", None) or dtype)  # np.float16
    if name.startswith("torch."):
        name = name[6:]
    name = _DTYPE_ALIAS.get(name, name)
    if name not in DTYPES:
        raise ValueError("dtype must be one of %s (or a numpy/torch dtype "
                         "of them), got %r" % (", ".join(DTYPES), dtype))
    return name


class MissingNamespaceError(FileNotFoundError):
    """A group lookup named namespaces that do not exist (.missing)."""

    def __init__(self, missing):
        super().__init__(_errno.ENOENT, "missing namespaces: " +
                         ", ".join(missing))
        self.missing = missing


# ---------------------------------------------------------- connector
class Connector:
    """One namespace of a kvfs mount, shaped like an engine's KV offload
    connector: get, put, exists, contains, delete, prefetch, lookup, their
    batched and async forms, close.

    mountpoint: the root of a kvfs mount (else NotKvfsMountError);
    namespace: its directory (created with `mode` when create=True).
    chunk_tokens / seed / extra: how keys() cuts and hashes token lists
    (must match what other users of the namespace use). chunk_bytes /
    dtype: the namespace's user.kvfs.chunk_bytes (every chunk that size;
    others fail with EMSGSIZE) and user.kvfs.dtype (bf16, fp16, fp32, fp8
    or a numpy/torch dtype: the byte shuffle L2 compresses with), set
    with user.kvfs.chunk_tokens when this call creates the namespace; on
    an existing namespace a value that differs from the one set raises
    ValueError (an unset one is set). lease_ms: default lease for pinned
    lookups (0 = the mount's). workers: threads of the async calls' pool.
    Thread-safe: methods only issue independent syscalls on a shared fd.
    """

    def __init__(self, mountpoint, namespace, create=True, mode=0o755,
                 chunk_tokens=None, seed=0, extra=b"", lease_ms=0,
                 chunk_bytes=None, dtype=None, workers=4):
        _check_ns(namespace)
        self.mountpoint = os.fspath(mountpoint)
        self.namespace = namespace
        self.chunk_tokens = chunk_tokens
        self.seed = seed
        self.extra = _extra_bytes(extra)
        self.lease_ms = _lease_ms(lease_ms)
        if chunk_bytes is not None and (
                not isinstance(chunk_bytes, int) or chunk_bytes < 0 or
                isinstance(chunk_bytes, bool)):
            raise ValueError("chunk_bytes must be an int >= 0")
        self.chunk_bytes = chunk_bytes
        self.dtype = None if dtype is None else _dtype_name(dtype)
        if not isinstance(workers, int) or workers < 1:
            raise ValueError("workers must be an int >= 1")
        self.workers = workers
        self._pool = None
        self._pool_lock = threading.Lock()
        self._fd = -1
        self._root = -1
        self._keys_ns = None  # _keys_namespace(), asked once
        root = os.open(self.mountpoint, os.O_RDONLY | os.O_DIRECTORY |
                       os.O_CLOEXEC)
        made = False
        try:
            self._check_mount(root)
            if create:
                try:
                    os.mkdir(namespace, mode, dir_fd=root)
                    made = True
                except FileExistsError:
                    pass
            self._fd = os.open(namespace, os.O_RDONLY | os.O_DIRECTORY |
                               os.O_CLOEXEC, dir_fd=root)
            self._set_ns_attrs(made)
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if made:  # half set up: nobody has used it yet
                try:
                    os.rmdir(namespace, dir_fd=root)
                except OSError:
                    pass
            os.close(root)
            raise
        self._root = root

    def _check_mount(self, root):
        """NotKvfsMountError unless root is the root of a kvfs mount: its
        .kvfs/version says "kvfs <version>", or, where ctl_mode keeps the
        caller out of .kvfs/ (EACCES), the kernel's mount table has a
        fuse.kvfs mount on root's device, rooted there."""
        try:
            fd = os.open(".kvfs/version", os.O_RDONLY | os.O_CLOEXEC,
                         dir_fd=root)
        except PermissionError:
            if _kvfs_mount_root(root):
                return
            raise NotKvfsMountError(
                self.mountpoint, "no readable .kvfs/version and no kvfs "
                "mount here in /proc/self/mountinfo") from None
        except OSError as e:
            raise NotKvfsMountError(
                self.mountpoint, "no .kvfs/version: %s; mount one with "
                "kvfs-mount" % os.strerror(e.errno)) from None
        try:
            head = os.read(fd, 64)
        finally:
            os.close(fd)
        if not head.startswith(b"kvfs "):
            raise NotKvfsMountError(self.mountpoint,
                                    ".kvfs/version is not kvfs's")

    def _set_ns_attrs(self, made):
        want = [("user.kvfs.chunk_bytes", self.chunk_bytes),
                ("user.kvfs.dtype", self.dtype)]
        if made:  # only reported (KV events' block_size): set it when ours
            want.append(("user.kvfs.chunk_tokens", self.chunk_tokens))
        for name, v in want:
            if v is None:
                continue
            v = str(v)
            if not made:
                try:
                    have = os.getxattr(self._fd, name).decode()
                except OSError as e:
                    if e.errno != _errno.ENODATA:
                        raise _oserror(e, "getxattr %s of namespace %s"
                                       % (name, self.namespace)) from None
                    have = ""
                if have == v:
                    continue
                if have not in ("", "0"):
                    raise ValueError("namespace %s has %s=%s, not %s" % (
                        self.namespace, name, have, v))
            try:
                os.setxattr(self._fd, name, v.encode())
            except OSError as e:
                raise _oserror(e, "setxattr %s=%s on namespace %s" % (
                    name, v, self.namespace)) from None

    # -- plumbing
    @property
    def fd(self):
        if self._fd < 0:
            raise ValueError("connector is closed")
        return self._fd

    def close(self):
        """Waits for the async calls in flight, then closes the namespace
        fd: every lease taken through it is released by the daemon."""
        pool = getattr(self, "_pool", None)
        if pool is not None:
            self._pool = None
            pool.shutdown(wait=True)
        for attr in ("_fd", "_root"):
            fd = getattr(self, attr)
            if fd >= 0:
                setattr(self, attr, -1)
                os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except (OSError, AttributeError):
            pass

    def keys(self, tokens):
        """Keys of the complete chunks of a token list (chunk_tokens,
        seed and extra as given to the constructor)."""
        if not self.chunk_tokens:
            raise ValueError("Connector(chunk_tokens=N) is needed for keys()")
        return keys(tokens, self.chunk_tokens, self.seed, self.extra)

    # -- connector API
    def exists(self, key):
        """True when the chunk is published (not counted as an access)."""
        # An O_PATH open, not stat: a stat of a chunk read before costs a
        # GETATTR round trip (the kernel marks its atime stale after every
        # read); O_PATH needs only the name (one LOOKUP on a miss, none
        # when cached), sends no OPEN or RELEASE, and fails as stat would
        # (ENOENT a miss, EACCES raised).
        try:
            os.close(os.open(key_hex(key), os.O_PATH | os.O_NOFOLLOW,
                             dir_fd=self.fd))
            return True
        except FileNotFoundError:
            return False

    def put(self, key, data):
        """Writes and publishes one chunk from a buffer object (bytes,
        bytearray, memoryview, array, numpy array). Returns True when
        written, False when the key was already there (EEXIST: someone
        else cached it). Other errors raise OSError naming the key (ENODATA
        for no bytes: a chunk without bytes is never published; EMSGSIZE
        for a size other than the namespace's chunk_bytes). Like kvfs_put,
        it writes a temporary and renames it onto the key, so a failed
        write never publishes a partial chunk."""
        name = key_hex(key)
        try:
            mv = _byte_view(data)
        except ValueError:
            if hasattr(data, "tobytes"):  # non-contiguous numpy array
                mv = memoryview(data.tobytes())
            else:
                raise
        nsfd = self.fd
        tmp = ".put.%d.%s" % (os.getpid(), os.urandom(8).hex())
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                         os.O_CLOEXEC, 0o644, dir_fd=nsfd)
        except OSError as e:
            raise self._error(e, "put", name) from None
        try:
            try:
                done, n = 0, len(mv)
                while done < n:
                    done += os.write(fd, mv[done:])
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=nsfd, dst_dir_fd=nsfd)
        except FileExistsError:
            self._unlink_quiet(tmp)
            return False
        except OSError as e:
            # the temporary's name is ours, not the caller's: name the key
            self._unlink_quiet(tmp)
            raise self._error(e, "put", name) from None
        except BaseException:
            self._unlink_quiet(tmp)
            raise
        return True

    def _error(self, e, op, key=None):
        """e as raised to the caller: "op ns/key: strerror"."""
        return _oserror(e, "%s %s%s" % (op, self.namespace, "" if key is None
                                        else "/" + key_hex(key)))

    def _open_chunk(self, name, op):
        """An O_RDONLY fd on chunk `name`, or None on a miss."""
        try:
            return os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._error(e, op, name) from None

    def delete(self, key):
        """Removes a chunk from every tier: True when it was there, False
        on a miss. A reader that has it open keeps reading its bytes."""
        name = key_hex(key)
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise self._error(e, "delete", name) from None
        return True

    def contains(self, keys):
        """How many leading keys of a chain are cached (LMCache's
        contains): lookup(keys).found, without pinning; 0 for no keys."""
        kl = list(keys)
        return self.lookup(kl).found if kl else 0

    def _unlink_quiet(self, name):
        try:
            os.unlink(name, dir_fd=self._fd)
        except OSError:
            pass

    def get(self, key, out=None):
        """Reads one chunk. With out (a writable buffer: bytearray,
        memoryview, numpy array...), reads into it and returns the number
        of bytes; without, returns the bytes. Returns None on a miss.
        Raises ValueError when out is smaller than the chunk.
        Into out, in a namespace of keys, the daemon copies the chunk
        straight there with one KVFS_IOC_GET (as get_many), where libkvfs
        is loaded and the daemon may write this process's memory; else,
        and without out, through the file named by the key's hex digits
        (open, read, close), in a path namespace too."""
        if out is not None and not _get_by_ioctl_refused and \
                self._keys_namespace():
            r = self._get_into(key, out)
            if r is not _BY_FILE:
                return r
        name = key_hex(key)
        fd = self._open_chunk(name, "get")
        if fd is None:
            return None
        try:
            size = _size(fd)
            if out is None:
                # One allocation, filled by the kernel: no second copy.
                parts = []
                done = 0
                while done < size:
                    b = os.read(fd, size - done)
                    if not b:
                        break
                    parts.append(b)
                    done += len(b)
                return parts[0] if len(parts) == 1 else b"".join(parts)
            mv = _byte_view(out, writable=True)
            if len(mv) < size:
                raise ValueError("get %s/%s: the chunk is %d bytes, the "
                                 "buffer %d" % (self.namespace, name, size,
                                                len(mv)))
            done = 0
            while done < size:
                n = os.readv(fd, [mv[done:size]])
                if n == 0:
                    break
                done += n
            return done
        except OSError as e:
            raise self._error(e, "get", name) from None
        finally:
            os.close(fd)

    def _keys_namespace(self):
        """Whether this is a namespace of keys (user.kvfs.names "keys";
        its mode changes only while it is empty): there a chunk's file
        is named by its key, as a GET finds it. In a path namespace a
        GET takes the key of a path, which is not the file named by the
        key's hex digits that get() opens."""
        if self._keys_ns is None:
            try:
                self._keys_ns = os.getxattr(
                    self.fd, "user.kvfs.names") == b"keys"
            except OSError:
                self._keys_ns = False
        return self._keys_ns

    def _get_into(self, key, out):
        """get(key, out) by one KVFS_IOC_GET (kvfs_mget): one round trip
        instead of the file's open, reads and release, no copy in this
        process. _BY_FILE when it cannot be used here (no libkvfs; the
        daemon may not write this process's memory: EPERM/ESRCH, or an
        older daemon: ENOTTY/EINVAL; then never again in this process).
        As kvfs_mget, a first EPERM makes libkvfs name the daemon as this
        process's ptracer (prctl PR_SET_PTRACER) and try once more."""
        global _get_by_ioctl_refused
        try:
            lib = load_library()
        except OSError:
            lib = None
        if lib is None or not hasattr(lib, "kvfs_mget"):
            _get_by_ioctl_refused = True
            return _BY_FILE
        k = parse_key(key)
        io = (IoArg * 1)()
        views = _Views()
        try:
            io[0].buf, io[0].len = views.add(out, writable=True)
            ctypes.memmove(io[0].key.b, k, 16)
            rc = lib.kvfs_mget(self.fd, io, 1, 0)  # GIL released
        finally:
            views.close()
        # EPERM/ESRCH: the daemon may not write this process's memory;
        # ENOTTY/EINVAL: a daemon or library older than the batched GET
        if rc in (-_errno.EPERM, -_errno.ESRCH, -_errno.ENOTTY,
                  -_errno.EINVAL):
            _get_by_ioctl_refused = True
            return _BY_FILE
        r = rc if rc < 0 else io[0].result
        if r >= 0:
            return r
        if r == -_errno.ENOENT:
            return None
        if r == -_errno.EMSGSIZE:
            raise ValueError("get %s/%s: the chunk is %d bytes, the buffer "
                             "%d" % (self.namespace, k.hex(), io[0].size,
                                     io[0].len))
        raise _neg_error(r, "get %s/%s" % (self.namespace, k.hex()))

    def get_mmap(self, key):
        """The chunk as a read-only mmap (MAP_PRIVATE), or None on a miss.
        The chunk stays pinned while the mapping exists."""
        fd = self._open_chunk(key_hex(key), "get_mmap")
        if fd is None:
            return None
        try:
            size = _size(fd)
            if size == 0:
                raise ValueError("cannot mmap an empty chunk")
            return mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE,
                             prot=mmap.PROT_READ)
        finally:
            os.close(fd)

    def lookup(self, keys, pin=False, prefetch=False, lease_ms=None,
               depth_base=0, wait=None):
        """Batched lookup of a key chain: the leading run cached. pin=True
        pins the run under leases (release() them, or they expire after
        lease_ms, or when close() is called). wait=SECONDS: return as soon
        as the whole chain is present (published here or by another node
        through L3), or after SECONDS with the leading run there then (a
        partial run, not an error); pins are taken when the wait ends.
        A chain longer than 512 keys is one ioctl (by address, up to
        16,384 keys; in parts of 512 where the daemon may not read this
        process's memory), with one lease when pinned."""
        chain = _key_chain(keys)
        nkeys = len(chain) // 16
        if not nkeys:
            raise ValueError("lookup needs at least one key")
        _check_depths(depth_base, nkeys)
        flags = (LOOKUP_PIN if pin else 0) | (LOOKUP_PREFETCH if prefetch
                                              else 0)
        ms = self.lease_ms if lease_ms is None else _lease_ms(lease_ms)
        deadline = wait_deadline(wait)
        res = LookupResult()
        arg = LookupArg()
        off = 0
        try:
            while off < nkeys:
                # more than one struct's worth: by address, one round trip
                # (kvfs.h KVFS_LOOKUP_KEYS_AT), as libkvfs's kvfs_lookup
                at = nkeys - off > LOOKUP_MAX and not _keys_at_refused
                n = min(nkeys - off, LOOKUP_AT_MAX if at else LOOKUP_MAX)
                part = chain[16 * off:16 * (off + n)]
                ctypes.memset(ctypes.addressof(arg), 0,
                              LookupArg.keys.offset)
                arg.version = ABI_VERSION
                arg.size = ctypes.sizeof(LookupArg)
                arg.flags = flags | (LOOKUP_KEYS_AT if at else 0)
                arg.nkeys = n
                arg.lease_ms = ms
                arg.depth_base = depth_base + off
                if at:
                    keybuf = ctypes.create_string_buffer(part, len(part))
                    ctypes.c_uint64.from_buffer(
                        arg, LookupArg.keys.offset).value = \
                        ctypes.addressof(keybuf)
                else:
                    ctypes.memmove(arg.keys, part, len(part))
                try:
                    if deadline is None:
                        _ioctl(self.fd, IOC_LOOKUP, arg)
                    else:
                        ioctl_wait(self.fd, IOC_LOOKUP, arg, LOOKUP_WAIT,
                                   deadline)
                except OSError as e:
                    if at and e.errno in (_errno.EPERM, _errno.ESRCH,
                                          _errno.EINVAL):
                        # the daemon may not read this process's memory
                        # (or is older than the flag): the keys inside
                        # the struct from now on, this part again
                        _refuse_keys_at()
                        continue
                    raise self._error(e, "lookup in") from None
                res.found += arg.found
                res.in_l1 += arg.in_l1
                res.in_l2 += arg.in_l2
                res.in_l3 += arg.in_l3
                if arg.lease_id:
                    res.leases.append(arg.lease_id)
                if arg.found < n:
                    break
                off += n
        except BaseException:
            self._drop(res)
            raise
        return res

    def prefetch(self, keys):
        """Starts promoting the L2 part of the cached run into L1; returns
        the LookupResult."""
        return self.lookup(keys, prefetch=True)

    def group_lookup(self, namespaces, keys, pin=False, prefetch=False,
                     lease_ms=None, depth_base=0):
        """The leading run that every namespace (tensor-parallel ranks)
        holds; pin=True pins it in all of them. Raises
        MissingNamespaceError (.missing) when a namespace does not exist."""
        names = [_check_ns(n) for n in namespaces]
        if not names or len(names) > GROUP_MAX:
            raise ValueError("1..%d namespaces" % GROUP_MAX)
        chain = _key_chain(keys)
        nkeys = len(chain) // 16
        if not nkeys:
            raise ValueError("group_lookup needs at least one key")
        _check_depths(depth_base, nkeys)
        flags = (LOOKUP_PIN if pin else 0) | (LOOKUP_PREFETCH if prefetch
                                              else 0)
        ms = self.lease_ms if lease_ms is None else _lease_ms(lease_ms)
        res = LookupResult()
        arg = GroupLookupArg()
        for i, n in enumerate(names):
            arg.ns[i].value = n
        try:
            for off in range(0, nkeys, GROUP_KEYS_MAX):
                n = min(nkeys - off, GROUP_KEYS_MAX)
                part = chain[16 * off:16 * (off + n)]
                arg.version = ABI_VERSION
                arg.size = ctypes.sizeof(GroupLookupArg)
                arg.flags = flags
                arg.nkeys = n
                arg.nns = len(names)
                arg.lease_ms = ms
                arg.found = 0
                arg.depth_base = depth_base + off
                arg.lease_id = 0
                ctypes.memset(arg.missing, 0, GROUP_MAX)
                ctypes.memmove(arg.keys, part, len(part))
                try:
                    _ioctl(self._root, IOC_GROUP_LOOKUP, arg)
                except FileNotFoundError:
                    missing = [namespaces[i] for i in range(len(names))
                               if arg.missing[i]]
                    if missing:
                        raise MissingNamespaceError(missing) from None
                    raise
                res.found += arg.found
                if arg.lease_id:
                    res.leases.append(arg.lease_id)
                if arg.found < n:
                    break
        except BaseException:
            self._drop(res, self._root)
            raise
        return res

    def unpin(self, lease_id):
        """Releases one lease (FileNotFoundError, ENOENT, when unknown or
        expired; the message names the lease)."""
        arg = UnpinArg(ABI_VERSION, ctypes.sizeof(UnpinArg), int(lease_id))
        try:
            _ioctl(self.fd, IOC_UNPIN, arg)
        except OSError as e:
            raise _oserror(e, "unpin lease %d in %s" % (
                int(lease_id), self.namespace)) from None

    def release(self, result):
        """Releases every lease of a LookupResult. Leases that already
        expired are ignored; returns how many were released."""
        n = 0
        leases, result.leases = result.leases, []
        for lid in leases:
            try:
                self.unpin(lid)
                n += 1
            except FileNotFoundError:
                pass
        return n

    def _drop(self, res, fd=None):
        for lid in res.leases:
            try:
                _ioctl(self._fd if fd is None else fd, IOC_UNPIN,
                       UnpinArg(ABI_VERSION, ctypes.sizeof(UnpinArg), lid))
            except OSError:
                pass
        res.leases = []

    def handle(self, key, kind=0):
        """A zero-copy Handle on a chunk (None on a miss). kind: 0 = the
        L1's own (HANDLE_HOST_MMAP for host and pinned L1,
        HANDLE_CUDA_IPC for cuda L1), or HANDLE_CUDA_IPC to get the chunk
        on the GPU from a pinned L1 (the daemon DMAs it into a device
        buffer of its own), or HANDLE_HOST_MMAP."""
        if kind not in (0, HANDLE_HOST_MMAP, HANDLE_CUDA_IPC):
            raise ValueError("kind must be 0, HANDLE_HOST_MMAP or "
                             "HANDLE_CUDA_IPC")
        name = key_hex(key)
        fd = self._open_chunk(name, "handle")
        if fd is None:
            return None
        try:
            arg = HandleArg()
            arg.version = ABI_VERSION
            arg.size = ctypes.sizeof(HandleArg)
            arg.kind = kind
            try:
                _ioctl(fd, IOC_HANDLE, arg)
            except OSError as e:
                raise self._error(e, "handle", name) from None
            if kind and arg.kind != kind:
                # a daemon from before kinds could be asked for
                rel = HandleReleaseArg()
                rel.version = ABI_VERSION
                rel.size = ctypes.sizeof(HandleReleaseArg)
                rel.handle_id = arg.handle_id
                _ioctl(fd, IOC_HANDLE_RELEASE, rel)
                raise OSError(_errno.EOPNOTSUPP,
                              "the mount gave handle kind %d, not %d" %
                              (arg.kind, kind))
        except BaseException:
            os.close(fd)
            raise
        return Handle(fd, arg)

    # -- batched transfers (KVFS_IOC_GET / KVFS_IOC_PUT through libkvfs)
    def _xfer(self, keys, buffers, put, offsets=None, lengths=None,
              wait=None):
        chain = _key_chain(keys)
        kl = [chain[i:i + 16] for i in range(0, len(chain), 16)]
        bl = list(buffers)
        if len(kl) != len(bl):
            raise ValueError("%d keys but %d buffers" % (len(kl), len(bl)))
        if not kl:
            return []
        if put and len(set(kl)) != len(kl):
            raise ValueError("a key appears twice in one put_many")
        n = len(kl)
        for name, v in (("offsets", offsets), ("lengths", lengths)):
            if v is not None and len(v) != n:
                raise ValueError("%d keys but %d %s" % (n, len(v), name))
        io = (IoArg * n)()
        views = _Views()
        try:
            for i, (k, b) in enumerate(zip(kl, bl)):
                addr, size = views.add(b, writable=not put)
                ctypes.memmove(io[i].key.b, k, 16)
                io[i].buf = addr
                io[i].len = size
                if offsets is not None:
                    io[i].offset = _u64(offsets[i], "offsets")
                if lengths is not None:
                    io[i].length = _u64(lengths[i], "lengths")
            lib = load_library()
            if not hasattr(lib, "kvfs_mget"):
                raise OSError(_errno.ENOSYS, "this libkvfs has no kvfs_mget")
            # ctypes drops the GIL for the call: other threads run
            if wait is not None and wait > 0 and not put:
                # a signal whose handler returns: go on waiting for the
                # time left (PEP 475); a GET is safe to send again
                deadline = wait_deadline(wait)
                while True:
                    left = max(0.0, deadline - time.monotonic())
                    rc = lib.kvfs_mget_wait(self.fd, io, n, 0,
                                            min(int(left * 1000 + 0.999),
                                                0xffffff))
                    if rc != -_errno.EINTR or left <= 0:
                        break
            else:
                rc = (lib.kvfs_mput(self.fd, io, n) if put else
                      lib.kvfs_mget(self.fd, io, n, 0))
        finally:
            views.close()
        op = "put_many" if put else "get_many"
        if rc < 0:
            raise _neg_error(rc, "%s in %s" % (op, self.namespace))
        out = []
        for k, e in zip(kl, io):
            r = e.result
            if put and r in (0, -_errno.EEXIST):
                out.append(r == 0)
            elif not put and r >= 0:
                out.append(r)
            elif not put and r == -_errno.ENOENT:
                out.append(None)
            else:
                out.append(_neg_error(r, "%s %s/%s" % (op, self.namespace,
                                                       k.hex())))
        return out

    def get_many(self, keys, buffers, offsets=None, lengths=None, wait=None):
        """Copies many chunks into the caller's buffers, 240 per ioctl, the
        daemon writing straight into them (no FUSE data transfer).

        buffers: writable, C-contiguous buffer objects (bytearray,
        memoryview, numpy arrays, mmap...), one per key. offsets/lengths
        (optional, one per key): the byte range of each chunk wanted
        (length 0 = to the end), e.g. one layer's slice of many chunks.
        Returns one result per key, in order: the number of bytes copied
        (int), None on a miss, or an OSError instance (not raised) for
        that key alone: EMSGSIZE (the buffer is too small; nothing
        copied), ERANGE (the range reaches past the chunk's end), EFAULT.
        Raises OSError for the whole call (EACCES, EPERM...), TypeError for
        a read-only buffer or no buffer at all, ValueError for a buffer
        that is not contiguous, a key count that differs, or an offset or
        length outside 0..2**64-1.
        wait=SECONDS: first wait until every key is present (in order, as
        a chain) or SECONDS pass, then copy what is there (the rest:
        None). A signal handler that returns lets the wait go on (PEP
        475); one that raises ends it with its exception."""
        return self._xfer(keys, buffers, False, offsets, lengths, wait)

    def put_many(self, keys, buffers):
        """Publishes many chunks from buffer objects (bytes, bytearray,
        memoryview, numpy arrays, mmap; C-contiguous), 240 per ioctl: each
        is copied by the daemon, checksummed and published atomically.
        Returns one result per key: True (stored), False (already there:
        EEXIST, count it as stored), or an OSError instance for that key
        alone (EFBIG above max_chunk, EMSGSIZE against the namespace's
        chunk_bytes, ENOSPC...). A key twice raises ValueError; whole-call
        errors (EACCES...) raise OSError."""
        return self._xfer(keys, buffers, True)

    def list(self):
        """Key names published in the namespace."""
        # A fresh directory fd: a listing is a snapshot taken at opendir.
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC,
                     dir_fd=self.fd)
        try:
            return [n for n in os.listdir(fd) if not n.startswith(".")]
        finally:
            os.close(fd)

    def stat(self, key):
        """os.stat_result of a chunk, or None on a miss (like get)."""
        name = key_hex(key)
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._error(e, "stat", name) from None
        if not _stat.S_ISREG(st.st_mode):
            raise OSError(_errno.EINVAL, "stat %s/%s: not a chunk" % (
                self.namespace, name))
        return st

    # -- async forms (concurrent.futures, run by the connector's pool)
    def _submit(self, fn, *args):
        self.fd  # ValueError once closed
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.workers,
                    thread_name_prefix="kvfs-%s" % self.namespace)
            return self._pool.submit(fn, *args)

    def put_async(self, key, data):
        """put in the pool: a Future of its result (True / False) or its
        exception. data must not change until the Future is done."""
        return self._submit(self.put, key, data)

    def get_async(self, key, out=None):
        """get in the pool: a Future of the bytes (or the count copied
        into out), None on a miss."""
        return self._submit(self.get, key, out)

    def put_many_async(self, keys, buffers):
        """put_many in the pool: a Future of its list of results."""
        return self._submit(self.put_many, list(keys), list(buffers))

    def get_many_async(self, keys, buffers, offsets=None, lengths=None):
        """get_many in the pool: a Future of its list of results."""
        return self._submit(self.get_many, list(keys), list(buffers),
                            offsets, lengths)
