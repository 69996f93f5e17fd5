"""A GPU process made from the driver alone: what a bare GPU node has (libcuda.so.1, no CUDA toolkit, no
torch). The `gpu` test tier starts it to see its own process in the exporter's per-process and per-pod series.

Run as a script with the GPU machine's python (`python3 tests/cuda_process.py --mib 256`): it makes the
primary context of CUDA device 0 current (select the GPU with CUDA_VISIBLE_DEVICES=<uuid>), allocates
`--mib` of device memory, prints `ready <pid>` and then keeps the SMs busy with a small spinning kernel (PTX,
compiled by the driver's own JIT) until its stdin closes, so NVML has per-process utilization samples for
it. Imports nothing from this repository, only the standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import sys

# One 32-bit add per loop iteration and thread, `n` iterations; every thread stores its sum so the loop is
# not optimised away. PTX ISA 6.0 for sm_50 runs on every board a driver of the last years JITs for.
SPIN_PTX = b"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry spin(.param .u64 out, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
LOOP:
    add.u32 %r3, %r3, %r2;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p, %r2, %r1;
    @%p bra LOOP;
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r3;
    ret;
}
\x00"""

SPIN_ITERATIONS = 1 << 20  # about a millisecond per launch on a current board
BLOCKS, THREADS = 1024, 256


class CudaError(RuntimeError):
    """A CUDA driver call returned an error code."""


def _check(cuda: ctypes.CDLL, call: str, result: int) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(result, ctypes.byref(name))
        raise CudaError(f"{call} failed: {result} ({(name.value or b'?').decode()})")


def hold(mib: int) -> None:
    cuda = ctypes.CDLL("libcuda.so.1")
    _check(cuda, "cuInit", cuda.cuInit(0))
    device = ctypes.c_int()
    _check(cuda, "cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(device), 0))
    context = ctypes.c_void_p()  # the device's primary context, as the CUDA runtime (and torch) use it
    _check(cuda, "cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
    _check(cuda, "cuCtxSetCurrent", cuda.cuCtxSetCurrent(context))
    memory = ctypes.c_uint64()
    _check(cuda, "cuMemAlloc", cuda.cuMemAlloc_v2(ctypes.byref(memory), ctypes.c_size_t(mib << 20)))
    module = ctypes.c_void_p()
    _check(cuda, "cuModuleLoadData", cuda.cuModuleLoadData(ctypes.byref(module), SPIN_PTX))
    function = ctypes.c_void_p()
    _check(cuda, "cuModuleGetFunction", cuda.cuModuleGetFunction(ctypes.byref(function), module, b"spin"))
    out, n = ctypes.c_uint64(memory.value), ctypes.c_uint32(SPIN_ITERATIONS)
    params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
                                   ctypes.cast(ctypes.byref(n), ctypes.c_void_p))
    print(f"ready {os.getpid()}", flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:  # until the test closes our stdin
        _check(cuda, "cuLaunchKernel", cuda.cuLaunchKernel(function, BLOCKS, 1, 1, THREADS, 1, 1, 0, None,
                                                           params, None))
        _check(cuda, "cuCtxSynchronize", cuda.cuCtxSynchronize())
    cuda.cuMemFree_v2(memory)  # the primary context goes with the process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="device memory to hold, MiB (default 256)")
    args = parser.parse_args()
    try:
        hold(args.mib)
    except (OSError, CudaError) as exc:  # no libcuda here, or the driver refused: say which, exit 1
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
