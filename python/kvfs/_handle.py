"""kvfs._handle - zero-copy handles on one chunk (Connector.handle): the
Handle a KVFS_IOC_HANDLE gives, its host mmap and its CUDA mapping
(through libkvfs's kvfs_cuda_open), and cuda_probe. kvfs re-exports the
public names; import kvfs, not this module.
"""
import ctypes
import mmap
import os

from . import _client  # load_library, at call time (it imports this)
from ._abi import (ABI_VERSION, CudaMapArg, HANDLE_HOST_MMAP,
                   HandleReleaseArg, IOC_HANDLE_RELEASE, _ioctl)


def cuda_probe():
    """(device count, None) when this process can use CUDA (the runtime
    is loaded at run time, as libkvfs does), else (0, the reason)."""
    err = ctypes.create_string_buffer(256)
    n = _client.load_library().kvfs_cuda_probe(err, len(err))
    if n > 0:
        return n, None
    return 0, err.value.decode("utf-8", "replace")


class CudaMapping:
    """A chunk of a HANDLE_CUDA_IPC handle mapped into this process
    (Handle.cuda_open): dptr is its device address (an int, for
    cudaMemcpy, torch's or cupy's pointer wrappers), length its bytes,
    device the device it is mapped on. close() unmaps it; the Handle
    closes its mappings before it releases the chunk."""

    def __init__(self, lib, m):
        self._lib = lib
        self._m = m
        self.dptr = m.dptr or 0
        self.length = m.length
        self.device = m.device

    def close(self):
        if self._m is not None:
            m, self._m = self._m, None
            rc = self._lib.kvfs_cuda_close(ctypes.byref(m))
            if rc < 0:
                raise OSError(-rc, os.strerror(-rc))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Handle:
    """A zero-copy handle on one chunk (pins it until close()).

    kind HANDLE_HOST_MMAP: mmap() maps the chunk read-only.
    kind HANDLE_CUDA_IPC: ipc (64 bytes) is a cudaIpcMemHandle_t for
    device `device`; the chunk is at [offset, offset + length);
    cuda_open() maps it."""

    def __init__(self, fd, arg):
        self.fd = fd
        self.kind = arg.kind
        self.device = arg.device
        self.offset = arg.offset
        self.length = arg.length
        self.handle_id = arg.handle_id
        self.ipc = bytes(arg.ipc)
        self._arg = arg
        self._maps = []

    def cuda_open(self, device=-1):
        """Maps a HANDLE_CUDA_IPC chunk into this process (kvfs_cuda_open:
        cudaIpcOpenMemHandle through the CUDA runtime loaded at run time)
        and returns a CudaMapping. device: this process's device number,
        or -1 for the handle's. OSError: ENOTSUP for a host handle (use
        mmap()), ENODEV without CUDA or that device, EIO when CUDA refuses
        the handle."""
        if self.fd < 0:
            raise ValueError("handle is closed")
        lib = _client.load_library()
        m = CudaMapArg()
        rc = lib.kvfs_cuda_open(ctypes.byref(self._arg), int(device),
                                ctypes.byref(m))
        if rc < 0:
            raise OSError(-rc, os.strerror(-rc))
        cm = CudaMapping(lib, m)
        self._maps.append(cm)
        return cm

    def _close_maps(self):
        maps, self._maps = self._maps, []
        for cm in maps:
            try:
                cm.close()
            except OSError:
                pass

    def mmap(self):
        """An mmap object of the chunk (read-only, MAP_PRIVATE); it stays
        valid after close()."""
        if self.kind != HANDLE_HOST_MMAP:
            raise ValueError("not a host-mmap handle (kind %d)" % self.kind)
        if self.fd < 0:
            raise ValueError("handle is closed")
        return mmap.mmap(self.fd, self.length, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ)

    def release(self):
        """Releases the pin but keeps the fd open."""
        if self.fd < 0 or not self.handle_id:
            return
        self._close_maps()  # before the daemon frees the buffer
        arg = HandleReleaseArg(ABI_VERSION, ctypes.sizeof(HandleReleaseArg),
                               self.handle_id)
        self.handle_id = 0
        _ioctl(self.fd, IOC_HANDLE_RELEASE, arg)

    def close(self):
        """Releases the handle and closes its fd (either releases it)."""
        if self.fd >= 0:
            self._close_maps()  # before the daemon frees the buffer
            fd, self.fd = self.fd, -1
            self.handle_id = 0
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except OSError:
            pass
