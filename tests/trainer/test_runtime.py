import platform

import pytest

from trainer.runtime import retain_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt tuning is glibc-only")
def test_heap_tuning_applies_on_glibc():
    assert retain_freed_memory() is True
