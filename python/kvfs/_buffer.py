"""Transfer buffers in huge pages: the Python side of kvfs_buf_alloc
(include/kvfs.h section 4a), without needing libkvfs.

Connector.get_many and put_many take any writable or readable buffer; the
daemon copies into (or out of) it with process_vm_writev / _readv, which
pin each page of the caller's they touch: 512 pins per 2 MiB of 4 KiB
pages, one for a huge page, about twice the rate (docs/performance.md,
"Batched transfers"). buffer() gives memory that copies at that rate.
"""
import ctypes
import errno
import mmap
import os

__all__ = ["buffer", "HUGE_PAGE"]

HUGE_PAGE = 2 << 20
_MADV_POPULATE_WRITE = 23  # Linux 5.14; older kernels: touched by hand


def buffer(nbytes):
    """A zeroed, writable buffer of nbytes for get_many / put_many (or
    readinto): a memoryview (format "B") of private anonymous memory that
    starts on a 2 MiB boundary, asked to be transparent huge pages
    (MADV_HUGEPAGE: THP "always" or "madvise"; elsewhere 4 KiB pages, as
    right, not faster) and populated now. numpy.frombuffer(buf, dtype)
    views it. The memory is freed when the view and every view of it are
    gone (or after buf.release() and no other view).

    Raises TypeError (nbytes not an int), ValueError (nbytes < 1),
    MemoryError when the memory cannot be had (Linux 5.14 or later says
    so before touching it; older kernels fault it in page by page).
    """
    if not isinstance(nbytes, int) or isinstance(nbytes, bool):
        raise TypeError("nbytes must be an int, not %s"
                        % type(nbytes).__name__)
    if nbytes < 1:
        raise ValueError("nbytes must be at least 1, not %d" % nbytes)
    n = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    # private (a shared anonymous mapping is shmem: 4 KiB pages where
    # shmem_enabled is never); one huge page more, for the alignment
    try:
        m = mmap.mmap(-1, n + HUGE_PAGE,
                      flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError as e:
        if e.errno != errno.ENOMEM:
            raise
        raise MemoryError("kvfs.buffer(%d): %s" % (
            nbytes, os.strerror(e.errno))) from None
    probe = ctypes.c_char.from_buffer(m)
    addr = ctypes.addressof(probe)
    del probe  # an export would keep m from being closed
    off = -addr % HUGE_PAGE
    if hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE, off, n)
    try:
        m.madvise(_MADV_POPULATE_WRITE, off, n)
    except OSError as e:
        if e.errno == errno.ENOMEM:  # not touched page by page: no OOM
            m.close()
            raise MemoryError("kvfs.buffer(%d): %s" % (
                nbytes, os.strerror(e.errno))) from None
        for k in range(off, off + n, 4096):  # before Linux 5.14: EINVAL
            m[k] = 0
    return memoryview(m)[off:off + nbytes]
