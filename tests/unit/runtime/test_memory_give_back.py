"""The heap's free pages go back to the system: what a night's churn freed leaves the process's RSS."""

import ctypes.util

import psutil
import pytest

from locust_llm.runtime.cpu import give_back_memory


@pytest.mark.skipif(ctypes.util.find_library("c") is None or not psutil.LINUX, reason="glibc's malloc_trim only")
def test_freed_heap_pages_leave_the_rss():
    """128 MiB in 1 KiB blocks (past Python's small-object allocator: glibc's heap), all freed but the last, which
    pins the heap's top: glibc keeps the freed pages until they are given back, then nearly all of them go."""
    blocks = [bytearray(1024) for _ in range(128 * 1024)]
    last = blocks[-1]
    del blocks
    before = psutil.Process().memory_info().rss
    assert give_back_memory()
    after = psutil.Process().memory_info().rss
    assert before - after > 64 * 2**20, (before >> 20, after >> 20)
    assert len(last) == 1024
