"""Runs the PTX that flexsn-translate emitted (scripts/gen_gpu_bundle.sh puts
it in .gpu/) on the GPU through CuPy, checks every kernel against a float32
PyTorch reference of the same neuron, and times LIF inference next to a
device-to-device copy measured in the same run.

This is the GPU check of the lowering until the CUDA runtime exists: it loads
the PTX with the driver (cuModuleLoad via cupy.RawModule), launches with the
manifest's block size and grid, and reads results back with torch.
"""
import json
import os
import sys

import cupy as cp
import numpy as np
import torch

BUNDLE = os.environ.get("FLEXSN_BUNDLE", ".gpu")
dev = torch.device("cuda")


# --- float32 references, op for op as the examples are written -------------
def spike(h):
    return (h >= 0).to(h.dtype)


def lif(x, v):
    h = v + (x - v) / 2.0
    s = spike(h - 1.0)
    return [s], [h * (1.0 - s)]


def if_neuron(x, v):
    h = v + x
    s = spike(h - 1.0)
    return [s], [h * (1.0 - s)]


def plif(x, v, w):
    k = 1.0 / (1.0 + torch.exp(-w))
    h = v + (x - v) * k
    s = spike(h - 1.0)
    return [s], [h * (1.0 - s)]


def lif_soft_detach(x, v):
    h = 0.5 * v + x
    s = spike(h - 1.0)
    return [s], [h - s * 1.0]


def two_in_two_state(x, y, v, r):
    gamma = torch.tensor(0.899999976, dtype=torch.float32, device=x.device)
    h = 0.5 * v + x
    o1 = spike(h - (r + 1.0))
    o2 = spike(h - 1.0)
    rn = gamma * r + o1
    v1 = h * (1.0 - o1)
    v2 = h - o2
    yy = 1.0 / (1.0 + torch.exp(-y))
    vn = v1 * yy + v2 * (1.0 - yy)
    return [o1, o2], [vn, rn]


CORES = {"lif": lif, "if": if_neuron, "plif": plif,
         "lif_soft_detach": lif_soft_detach,
         "two_in_two_state": two_in_two_state}


def reference(core, kernel, ins, states, params, T, store_dtype):
    """Runs `core` step by step in float32; rounds stored values to the
    storage dtype as the kernel does (state carried in float32)."""
    outs = [[] for _ in range(kernel["num_outputs"])]
    seqs = [[] for _ in range(kernel["num_states"])]
    st = [s.float() for s in states]
    order = range(T - 1, -1, -1) if kernel["reverse"] else range(T)
    for t in order:
        y, st = core(*[x[t].float() for x in ins], *st,
                     *[p.float() for p in params])
        for k, o in enumerate(y):
            outs[k].append((t, o.to(store_dtype)))
        for k, s in enumerate(st):
            seqs[k].append((t, s.to(store_dtype)))
    def stack(lst, ncl):
        if not lst:
            return torch.empty(0, ncl, dtype=store_dtype, device=dev)
        return torch.stack([v for _, v in sorted(lst, key=lambda p: p[0])])
    ncl = states[0].numel() if states else ins[0].shape[1]
    return ([stack(o, ncl) for o in outs], [stack(s, ncl) for s in seqs],
            [s.to(store_dtype) for s in st])


def run_kernel(module, kernel, ptr_args, T, ncl):
    fn = module.get_function(kernel["name"])
    per_block = kernel["block_size"] * kernel["neurons_per_thread"]
    grid = (ncl + per_block - 1) // per_block
    if grid == 0:
        return
    args = [np.uint64(p) for p in ptr_args] + [np.int64(T), np.int64(ncl)]
    fn((grid,), (kernel["block_size"],), tuple(args))


DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16,
          "f16": torch.float16, "f64": torch.float64}


def make_args(kernel, T, ncl, dtype, gen, misalign=False):
    """Tensors in manifest order; results poisoned with NaN."""
    tensors = {}
    ptrs = []
    for a in kernel["args"]:
        role = a["role"]
        if role in ("T", "NCL"):
            continue
        shape = {"input": (T, ncl), "output": (T, ncl), "state_seq": (T, ncl),
                 "param_scalar": (1,)}.get(role, (ncl,))
        n = int(np.prod(shape))
        # Each argument has its own storage type (a scalar f32 param stays
        # f32 in a bf16 neuron).
        dtype = DTYPES[a["dtype"]]
        if role in ("output", "state_seq", "final_state"):
            base = torch.full((n + 1,), float("nan"), dtype=dtype, device=dev)
        else:
            lo, hi = {"input": (-1.0, 3.0), "init_state": (-0.5, 0.5)}.get(
                role, (-1.0, 1.0))
            base = (torch.rand(n + 1, generator=gen, device=dev) * (hi - lo)
                    + lo).to(dtype)
        t = (base[1:] if misalign else base[:n]).view(shape)
        tensors.setdefault(role, []).append(t)
        ptrs.append(t.data_ptr())
    return tensors, ptrs


def rel_err(got, ref):
    if ref.numel() == 0:
        return 0.0 if got.numel() == 0 else float("inf")
    d = (got.double() - ref.double()).abs().max().item()
    return d / max(ref.double().abs().max().item(), 1.0)


def check_all():
    rows = []
    ok_all = True
    gen = torch.Generator(device=dev)
    gen.manual_seed(0)
    for name, core in CORES.items():
        for dt_name, dtype, tol in (("f32", torch.float32, 1e-5),
                                    ("bf16", torch.bfloat16, 1e-2)):
            stem = os.path.join(BUNDLE, f"{name}.{dt_name}")
            manifest = json.load(open(stem + ".json"))
            module = cp.RawModule(path=stem + ".ptx")
            for kernel in manifest["kernels"]:
                for T, ncl, mis in ((0, 1000, False), (1, 1, False),
                                    (37, 4099, False), (64, 4096, False),
                                    (64, 4096, True), (8, 1 << 20, False)):
                    tensors, ptrs = make_args(kernel, T, ncl, dtype, gen, mis)
                    if os.environ.get("FLEXSN_TRACE"):
                        print("launch", kernel["name"], dt_name, T, ncl, mis,
                              [hex(p % 64) for p in ptrs], flush=True)
                    torch.cuda.synchronize()
                    run_kernel(module, kernel, ptrs, T, ncl)
                    cp.cuda.runtime.deviceSynchronize()
                    params = tensors.get("param_scalar", []) + tensors.get(
                        "param", [])
                    ref_out, ref_seq, ref_final = reference(
                        core, kernel, tensors.get("input", []),
                        tensors.get("init_state", []), params, T, dtype)
                    errs = [rel_err(g, r) for g, r in
                            zip(tensors.get("output", []), ref_out)]
                    if kernel["variant"] == "inference":
                        errs += [rel_err(g, r) for g, r in
                                 zip(tensors.get("state_seq", []), ref_seq)]
                    else:
                        errs += [rel_err(g, r) for g, r in
                                 zip(tensors.get("final_state", []), ref_final)]
                    worst = max(errs) if errs else 0.0
                    ok = worst <= tol
                    ok_all &= ok
                    rows.append((kernel["name"], dt_name, T, ncl, mis, worst,
                                 "ok" if ok else "FAIL"))
    for r in rows:
        print("check %-28s %-4s T=%-3d NCL=%-8d misaligned=%-5s err=%.2e %s"
              % r)
    return ok_all


def bench(fn, reps=50):
    for _ in range(5):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return float(np.median([s.elapsed_time(e) for s, e in zip(starts, ends)]))


def bench_lif():
    src = torch.empty(1 << 28, dtype=torch.float32, device=dev)  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = bench(lambda: dst.copy_(src), reps=30)
    copy_bw = 2 * src.numel() * 4 / (copy_ms * 1e-3) / 1e9
    print(f"copy: {copy_ms:.3f} ms for 2 x 1 GiB, {copy_bw:.0f} GB/s")
    del src, dst
    manifest = json.load(open(os.path.join(BUNDLE, "lif.f32.json")))
    module = cp.RawModule(path=os.path.join(BUNDLE, "lif.f32.ptx"))
    gen = torch.Generator(device=dev)
    gen.manual_seed(1)
    print("%-18s %-6s %-9s %9s %9s %8s %7s" % (
        "kernel", "T", "NCL", "ms", "floor ms", "GB/s", "% copy"))
    for kernel in manifest["kernels"]:
        for T, ncl in ((8, 1 << 24), (4, 1 << 22), (32, 1 << 18),
                       (256, 1 << 16)):
            tensors, ptrs = make_args(kernel, T, ncl, torch.float32, gen)
            nbytes = sum(t.numel() * 4 for ts in tensors.values() for t in ts)
            ms = bench(lambda: run_kernel(module, kernel, ptrs, T, ncl))
            floor = nbytes / (copy_bw * 1e9) * 1e3
            bw = nbytes / (ms * 1e-3) / 1e9
            print("%-18s %-6d %-9d %9.4f %9.4f %8.0f %6.0f%%" % (
                kernel["name"], T, ncl, ms, floor, bw, 100 * bw / copy_bw))
            del tensors


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), "torch", torch.__version__,
          "cupy", cp.__version__)
    ok = check_all()
    bench_lif()
    print("ALL CHECKS PASSED" if ok else "SOME CHECKS FAILED")
    sys.exit(0 if ok else 1)
