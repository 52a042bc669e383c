"""kvfs._abi - the kernel interface of kvfs for the Python binding (the
kvfs package): ioctl numbers and the argument structs of include/kvfs.h
as ctypes.Structure (laid out exactly like the C ones), and the buffer
protocol views the batched transfers hand to libkvfs. kvfs re-exports the
public names; import kvfs, not this module.
"""
import ctypes
import errno
import fcntl
import os
import time

ABI_VERSION = 1
IOC_MAGIC = 0xCF
LOOKUP_MAX = 512
GROUP_MAX = 16
GROUP_KEYS_MAX = 384
NS_NAME_MAX = 127
LOOKUP_PIN = 0x1
LOOKUP_PREFETCH = 0x2
LOOKUP_WAIT = 0x4       # the timeout (ms) in flags bits 8..31
LOOKUP_KEYS_AT = 0x8    # the chain by address (keys_at), not in keys[]
LOOKUP_AT_MAX = 16384   # most keys of one lookup by address
XFER_WAIT = 0x2
WAIT_SHIFT = 8
WAIT_MS_MAX = 0xffffff
LAYER_TAG = b"kvfs.layer"  # kvfs_layer_keys' extra suffix
HANDLE_HOST_MMAP = 1
HANDLE_CUDA_IPC = 2


class Key(ctypes.Structure):
    _fields_ = [("b", ctypes.c_uint8 * 16)]


class LookupArg(ctypes.Structure):
    """struct kvfs_lookup"""
    _fields_ = [
        ("version", ctypes.c_uint32), ("size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32), ("nkeys", ctypes.c_uint32),
        ("lease_ms", ctypes.c_uint32), ("depth_base", ctypes.c_uint32),
        ("found", ctypes.c_uint32), ("in_l1", ctypes.c_uint32),
        ("in_l2", ctypes.c_uint32), ("in_l3", ctypes.c_uint32),
        ("lease_id", ctypes.c_uint64),
        ("keys", Key * LOOKUP_MAX),
    ]


class GroupLookupArg(ctypes.Structure):
    """struct kvfs_group_lookup"""
    _fields_ = [
        ("version", ctypes.c_uint32), ("size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32), ("nkeys", ctypes.c_uint32),
        ("nns", ctypes.c_uint32), ("lease_ms", ctypes.c_uint32),
        ("found", ctypes.c_uint32), ("depth_base", ctypes.c_uint32),
        ("lease_id", ctypes.c_uint64),
        ("missing", ctypes.c_uint8 * GROUP_MAX),
        ("ns", (ctypes.c_char * (NS_NAME_MAX + 1)) * GROUP_MAX),
        ("keys", Key * GROUP_KEYS_MAX),
    ]


class UnpinArg(ctypes.Structure):
    """struct kvfs_unpin"""
    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("lease_id", ctypes.c_uint64)]


class HandleArg(ctypes.Structure):
    """struct kvfs_handle"""
    _fields_ = [
        ("version", ctypes.c_uint32), ("size", ctypes.c_uint32),
        ("kind", ctypes.c_uint32), ("device", ctypes.c_int32),
        ("offset", ctypes.c_uint64), ("length", ctypes.c_uint64),
        ("handle_id", ctypes.c_uint64), ("ipc", ctypes.c_uint8 * 64),
    ]


class CudaMapArg(ctypes.Structure):
    """struct kvfs_cuda_map"""
    _fields_ = [
        ("dptr", ctypes.c_void_p), ("length", ctypes.c_uint64),
        ("device", ctypes.c_int), ("priv", ctypes.c_void_p),
    ]


class HandleReleaseArg(ctypes.Structure):
    """struct kvfs_handle_release"""
    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("handle_id", ctypes.c_uint64)]


# -- batched transfers (kvfs.h 3b / 4a): kvfs_mget / kvfs_mput via libkvfs
XFER_MAX = 240


class IoArg(ctypes.Structure):
    """struct kvfs_io of include/kvfs.h (one chunk of kvfs_mget/mput)."""
    _fields_ = [("key", Key), ("buf", ctypes.c_void_p),
                ("len", ctypes.c_size_t), ("offset", ctypes.c_uint64),
                ("length", ctypes.c_uint64), ("result", ctypes.c_int64),
                ("size", ctypes.c_uint64)]


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (the buffer protocol's view), to get the
    address of any buffer object without copying it."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p),
                ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
                ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
                ("internal", ctypes.c_void_p)]


_PyBUF_WRITABLE = 0x1
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer),
                        ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


class _Views:
    """Holds the Py_buffer views of a batch's buffers (contiguous, and
    writable for a GET) until the call is over: while held, the objects
    cannot be resized or closed under the daemon's copy."""

    def __init__(self):
        self._views = []

    def add(self, obj, writable):
        v = _PyBuffer()
        try:
            # PyBUF_SIMPLE(+WRITABLE): contiguous bytes, or BufferError
            # (numpy raises ValueError instead)
            if _get_buffer(obj, ctypes.byref(v),
                           _PyBUF_WRITABLE if writable else 0) != 0:
                raise TypeError("not a buffer")  # pragma: no cover
        except (BufferError, ValueError) as e:
            # whatever the exporter raised: read-only -> TypeError (as
            # readinto() does), not contiguous -> ValueError
            ro = writable and self._readable(obj)
            raise (TypeError if ro else ValueError)(
                "%s buffer needed: %s" % (
                    "a writable" if ro else "a contiguous", e)) from None
        except TypeError:
            raise TypeError("expected a buffer object, got %s"
                            % type(obj).__name__) from None
        self._views.append(v)
        return v.buf, v.len

    @staticmethod
    def _readable(obj):
        """Whether obj exports contiguous bytes when not asked to write."""
        v = _PyBuffer()
        try:
            if _get_buffer(obj, ctypes.byref(v), 0) != 0:
                return False  # pragma: no cover
        except (BufferError, ValueError, TypeError):
            return False
        _release_buffer(ctypes.byref(v))
        return True

    def close(self):
        for v in self._views:
            _release_buffer(ctypes.byref(v))
        self._views = []


def _iowr(nr, size):
    # Linux generic _IOC layout: dir(2) << 30 | size(14) << 16 | type << 8 | nr
    return (3 << 30) | (size << 16) | (IOC_MAGIC << 8) | nr


IOC_LOOKUP = _iowr(1, ctypes.sizeof(LookupArg))
IOC_GROUP_LOOKUP = _iowr(2, ctypes.sizeof(GroupLookupArg))
IOC_UNPIN = _iowr(3, ctypes.sizeof(UnpinArg))
IOC_HANDLE = _iowr(4, ctypes.sizeof(HandleArg))
IOC_HANDLE_RELEASE = _iowr(5, ctypes.sizeof(HandleReleaseArg))


def _ioctl(fd, req, arg):
    """ioctl with arg (a ctypes struct) updated in place; retries EINTR."""
    while True:
        try:
            return fcntl.ioctl(fd, req, arg, True)
        except InterruptedError:
            continue


def wait_deadline(wait):
    """The monotonic deadline of a wait of `wait` seconds (None: none)."""
    if wait is None or wait <= 0:
        return None
    return time.monotonic() + min(float(wait), WAIT_MS_MAX / 1000.0)


def wait_flags(flags, wait_flag, deadline):
    """flags with wait_flag and the milliseconds left until deadline
    (rounded up), or without both when none is left."""
    flags &= ~(wait_flag | (WAIT_MS_MAX << WAIT_SHIFT))
    if deadline is None:
        return flags
    left = deadline - time.monotonic()
    if left <= 0:
        return flags
    ms = min(WAIT_MS_MAX, max(1, int(left * 1000 + 0.999)))
    return flags | wait_flag | (ms << WAIT_SHIFT)


_libc = None


def _libc_ioctl():
    # fcntl.ioctl holds the GIL for the whole call: a waiting one would
    # stop every other thread of the process (the very one that may
    # publish what it waits for). ctypes lets go of it.
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong,
                                ctypes.c_void_p]
        _libc.ioctl.restype = ctypes.c_int
    return _libc.ioctl


def ioctl_wait(fd, req, arg, wait_flag, deadline):
    """A waiting lookup ioctl (the GIL released while it sleeps): each try
    carries the time left. A signal whose handler returns resumes the wait
    with the time left (PEP 475); EAGAIN (the daemon's waiter bounds)
    backs off and tries again."""
    ioctl = _libc_ioctl()
    pause = 0.00005
    while True:
        arg.flags = wait_flags(arg.flags, wait_flag, deadline)
        if ioctl(fd, req, ctypes.addressof(arg)) >= 0:
            return 0
        err = ctypes.get_errno()
        if err == errno.EINTR:
            continue
        if err != errno.EAGAIN:
            raise OSError(err, os.strerror(err))
        time.sleep(pause)
        pause = min(pause * 2, 0.005)
