"""benchmarks.kernel_profile: the symbol map that names Numba's machine code for ``perf`` (no sampling here)."""

import os
import subprocess
import sys

import pytest

from benchmarks import kernel_profile

_MAP_SCRIPT = """
import sys
from benchmarks import kernel_profile
kernel_profile.install()
import flowlib as fl
from benchmarks import bench
prob, p0 = bench.os_transversal()
fl.gradient_flow(prob, p0, 10.0, dense_output=False)
print(kernel_profile.write_map(sys.argv[1]))
"""


def test_short_names_of_numba_symbols():
    mangled = ("_ZN7flowlib7kernels6series19taylor_coefficientsB4v236B56c8tJTIeFIjxB2IKSgI4CrvQCk0Z4yRYcWsBAK4JJIqUWs"
               "IgmAA_3d_3dE155Network_28array")
    assert kernel_profile.short_name(mangled) == "series.taylor_coefficients"
    assert kernel_profile.short_name("dgemm_kernel_SKYLAKEX") == "dgemm_kernel_SKYLAKEX"


def test_shares_group_a_perf_report():
    report = """# comment
    40.00%  [.] dgemm_kernel_SKYLAKEX
    25.00%  [.] _ZN7flowlib7kernels6series19taylor_coefficientsB4v236B56c8tE155Network
     5.00%  [.] _ZN7flowlib7kernels6series19taylor_coefficientsB4v999B56c8tE155Network
    10.00%  [.] NRT_incref
     8.00%  [.] _PyEval_EvalFrameDefault
     2.00%  [k] clear_page_erms
    10.00%  [.] 0x00007f2e819ba059
"""
    rows = dict(kernel_profile.shares(report))
    assert rows == {"BLAS (dgemm and its copies)": 40.0, "series.taylor_coefficients": 30.0,
                    "Numba reference counting (NRT_incref / NRT_decref)": 10.0, "Python interpreter": 8.0,
                    "memory (malloc, free, memset, page clearing)": 2.0, "other (libm, Numba helpers, unnamed)": 10.0}


def test_elf_functions_refuses_other_data():
    with pytest.raises(ValueError, match="data must be a 64-bit little-endian ELF object"):
        kernel_profile.elf_functions(b"not an object file")


@pytest.mark.skipif(sys.platform != "linux" or sys.byteorder != "little", reason="ELF objects on Linux only")
def test_map_names_the_driver_and_the_series_kernels(tmp_path):
    """In a fresh process (the kernels load from the cache after install()): the map holds the driver loop and the
    Taylor recurrence at distinct, non-overlapping addresses, and Numba's reference counting."""
    path = str(tmp_path / "perf.map")
    root = os.path.dirname(os.path.dirname(os.path.abspath(kernel_profile.__file__)))
    subprocess.run([sys.executable, "-c", _MAP_SCRIPT, path], cwd=root, check=True, capture_output=True)
    entries = []
    for line in open(path):
        start, size, name = line.split(maxsplit=2)
        entries.append((int(start, 16), int(size, 16), name.strip()))
    names = {kernel_profile.short_name(name) for _, _, name in entries}
    assert {"driver.integrate_chunk", "series.taylor_coefficients", "NRT_incref", "NRT_decref"} <= names
    entries.sort()
    assert all(a + size <= b for (a, size, _), (b, _, _) in zip(entries, entries[1:]))
