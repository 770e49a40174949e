"""Drives libFlexSN.so from Python through ctypes on the GPU machine (no
MLIR there): compiles examples/lif.mlir with the training kernels, launches
the forward and the backward on torch tensors through flexsn_cuda_launch,
and checks them against the torch references of bench/gpu_ptx_check.py.
Usage: python3 bench/capi_smoke.py path/to/libFlexSN.so"""
import ctypes
import json
import sys

import torch

sys.path.insert(0, "bench")
import gpu_ptx_check as ref  # noqa: E402  (torch references)

lib = ctypes.CDLL(sys.argv[1])
lib.flexsn_version.restype = ctypes.c_char_p
lib.flexsn_program_ptx.restype = ctypes.c_char_p
lib.flexsn_program_manifest.restype = ctypes.c_char_p
lib.flexsn_cuda_describe.restype = ctypes.c_void_p
lib.flexsn_cuda_launch.argtypes = [
    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
    ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_int64,
    ctypes.c_int64, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_char_p)]


def check(r, err):
    if r != 0:
        raise RuntimeError(err.value.decode())


print(lib.flexsn_version().decode())
err = ctypes.c_char_p()
prog = ctypes.c_void_p()
dev = ctypes.c_void_p()
check(lib.flexsn_cuda_open(0, ctypes.byref(dev), ctypes.byref(err)), err)
desc = lib.flexsn_cuda_describe(dev)
print("device:", ctypes.cast(desc, ctypes.c_char_p).value.decode())
lib.flexsn_free(ctypes.c_void_p(desc))
chip = "sm_%d" % lib.flexsn_cuda_capability(dev)
src = open("examples/lif.mlir", "rb").read()
check(lib.flexsn_compile(src, ("chip=%s differentiate=1" % chip).encode(),
                         ctypes.byref(prog), ctypes.byref(err)), err)
ptx = lib.flexsn_program_ptx(prog)
kernels = {k["variant"]: k for k in
           json.loads(lib.flexsn_program_manifest(prog))["kernels"]}


def launch(kernel, ptrs, T, ncl):
    arr = (ctypes.c_uint64 * len(ptrs))(*ptrs)
    check(lib.flexsn_cuda_launch(
        dev, ptx, kernel["name"].encode(), arr, len(ptrs), T, ncl,
        kernel["block_size"], kernel["neurons_per_thread"],
        ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
        ctypes.byref(err)), err)
    check(lib.flexsn_cuda_synchronize(dev, ctypes.byref(err)), err)


ok = True
gen = torch.Generator(device="cuda")
gen.manual_seed(3)
ref.SURROGATE["kind"], ref.SURROGATE["alpha"] = ref.SURROGATES["lif"]
for T, ncl in ((0, 100), (1, 1), (8, 4099), (64, 1 << 16)):
    fwd, bwd = kernels["forward"], kernels["backward"]
    tensors, fptrs = ref.make_args(fwd, T, ncl, None, gen)
    launch(fwd, fptrs, T, ncl)
    ro, rs, _ = ref.reference(ref.lif, fwd, tensors["input"],
                              tensors["init_state"], [], T, torch.float32)
    e_fwd = max(ref.rel_err(tensors["output"][0], ro[0]),
                ref.rel_err(tensors["state_seq"][0], rs[0]))
    bptrs = ref.fill_backward(fwd, bwd, T, ncl, gen)
    launch(bwd, bptrs, T, ncl)
    exp = ref.reference_backward(ref.lif, fwd, bwd, T, ncl)
    e_bwd = max(ref.rel_err(a["tensor"].reshape(
        exp[(a["meaning"], a["meaning_index"])].shape),
        exp[(a["meaning"], a["meaning_index"])])
        for a in bwd["args"] if a["role"] in ("output", "final_state"))
    good = e_fwd <= 1e-5 and e_bwd <= 1e-5
    ok &= good
    print("capi lif T=%-3d NCL=%-6d forward err=%.1e backward err=%.1e %s"
          % (T, ncl, e_fwd, e_bwd, "ok" if good else "FAIL"))
lib.flexsn_program_destroy(prog)
lib.flexsn_cuda_close(dev)
print("CAPI SMOKE PASSED" if ok else "CAPI SMOKE FAILED")
sys.exit(0 if ok else 1)
