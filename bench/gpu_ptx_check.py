"""Runs the PTX that flexsn-translate emitted (scripts/gen_gpu_bundle.sh puts
it in .gpu/) on the GPU through CuPy, checks every kernel against a float32
PyTorch reference of the same neuron, and times LIF inference next to a
device-to-device copy measured in the same run.

Training kernels (flexsn-translate --options=differentiate): the forward, then the
backward fed with the forward's stored state sequence and random output
gradients, against BPTT with torch autograd (per-step, from the same stored
states, the example's surrogate as a custom autograd function).

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
# spike() is the Heaviside step; in the training references its gradient is
# the example's surrogate (set by `surrogate(...)`), through torch autograd.
SURROGATE = {"kind": "sigmoid", "alpha": 4.0}


class _Spike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h):
        ctx.save_for_backward(h)
        return (h >= 0).to(h.dtype)

    @staticmethod
    def backward(ctx, g):
        (h,) = ctx.saved_tensors
        a = SURROGATE["alpha"]
        if SURROGATE["kind"] == "sigmoid":
            sg = torch.sigmoid(a * h)
            return g * a * sg * (1.0 - sg)
        return g * (a / 2.0) / (1.0 + (torch.pi / 2.0 * a * h) ** 2)


def spike(h):
    return _Spike.apply(h)


SURROGATES = {"lif": ("sigmoid", 4.0), "if": ("atan", 2.0),
              "plif": ("sigmoid", 4.0), "lif_soft_detach": ("sigmoid", 4.0),
              "two_in_two_state": ("atan", 2.0)}


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
    return [s], [h - s.detach() * 1.0]


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


def shape_of(role, T, ncl):
    """Tensor shape of a kernel argument of `role` (manifest ABI role)."""
    if role in ("input", "lagged", "output", "state_seq"):
        return (T, ncl)
    if role in ("param_scalar", "sum_state"):
        return (1,)
    return (ncl,)


def make_args(kernel, T, ncl, dtype, gen, misalign=False):
    """Tensors in manifest order; results poisoned with NaN."""
    tensors = {}
    ptrs = []
    for a in kernel["args"]:
        role = a["role"]
        if role in ("T", "NCL"):
            continue
        shape = shape_of(role, T, ncl)
        n = int(np.prod(shape))
        # Each argument has its own storage type (a scalar f32 param stays
        # f32 in a bf16 neuron).
        dtype = DTYPES[a["dtype"]]
        if role == "sum_state":  # accumulated into: zero first
            base = torch.zeros((n + 1,), dtype=dtype, device=dev)
        elif role in ("output", "state_seq", "final_state"):
            base = torch.full((n + 1,), float("nan"), dtype=dtype, device=dev)
        else:
            lo, hi = {"input": (-1.0, 3.0), "init_state": (-0.5, 0.5)}.get(
                role, (-1.0, 1.0))
            base = (torch.rand(n + 1, generator=gen, device=dev) * (hi - lo)
                    + lo).to(dtype)
        t = (base[1:] if misalign else base[:n]).view(shape)
        tensors.setdefault(role, []).append(t)
        ptrs.append(t.data_ptr())
        a["tensor"] = t
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
                if kernel["variant"] == "backward":
                    continue
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
                    if kernel["variant"] in ("inference", "forward"):
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


def by_meaning(kernel, meaning, index=0):
    for a in kernel["args"]:
        if a.get("meaning") == meaning and a.get("meaning_index") == index:
            return a
    return None


def reference_backward(core, fwd, bwd, T, ncl):
    """BPTT with torch autograd, one step at a time in float32 from the state
    sequence the forward kernel stored (the backward kernel's semantics).
    Returns {(meaning, index): expected tensor}."""
    n_in = fwd["num_inputs"]
    n_st = fwd["num_states"]
    n_pa = fwd["num_params"]
    n_out = fwd["num_outputs"]
    xs = [by_meaning(fwd, "input", i)["tensor"].float() for i in range(n_in)]
    v0 = [by_meaning(fwd, "init_state", i)["tensor"].float()
          for i in range(n_st)]
    seq = [by_meaning(fwd, "state_seq", i)["tensor"].float()
           for i in range(n_st)]
    ps = [by_meaning(fwd, "param", i)["tensor"].float() for i in range(n_pa)]
    gy = [by_meaning(bwd, "grad_output", o) for o in range(n_out)]
    gy = [a["tensor"].float() if a else None for a in gy]
    gseq = [by_meaning(bwd, "grad_state_seq", s) for s in range(n_st)]
    gseq = [a["tensor"].float() if a else None for a in gseq]
    gfin = [by_meaning(bwd, "grad_final_state", s) for s in range(n_st)]
    carry = [a["tensor"].float().clone() if a else torch.zeros(ncl, device=dev)
             for a in gfin]
    gx = [torch.zeros(T, ncl, device=dev) for _ in range(n_in)]
    gp = [torch.zeros_like(p) for p in ps]
    for t in range(T - 1, -1, -1):
        x_t = [x[t].clone().requires_grad_() for x in xs]
        v_t = [(seq[s][t - 1] if t > 0 else v0[s]).clone().requires_grad_()
               for s in range(n_st)]
        p_t = [p.clone().requires_grad_() for p in ps]
        p_args = [p if p.numel() > 1 else p.reshape(()) for p in p_t]
        y, vn = core(*x_t, *v_t, *p_args)
        outs, grads = [], []
        for o in range(n_out):
            if gy[o] is not None:
                outs.append(y[o])
                grads.append(gy[o][t])
        for s in range(n_st):
            g = carry[s] + (gseq[s][t] if gseq[s] is not None else 0.0)
            outs.append(vn[s])
            grads.append(g)
        torch.autograd.backward(outs, grads)
        for i in range(n_in):
            if x_t[i].grad is not None:
                gx[i][t] = x_t[i].grad
        for s in range(n_st):
            carry[s] = (v_t[s].grad if v_t[s].grad is not None
                        else torch.zeros(ncl, device=dev))
        for k in range(n_pa):
            if p_t[k].grad is not None:
                gp[k] += p_t[k].grad
    exp = {}
    for i in range(n_in):
        exp[("grad_input", i)] = gx[i]
    for s in range(n_st):
        exp[("grad_init_state", s)] = carry[s]
    for k in range(n_pa):
        exp[("grad_param", k)] = gp[k]
    return exp


def fill_backward(fwd, bwd, T, ncl, gen):
    """Backward tensors: forward's stored tensors by meaning, random
    gradients, NaN results, zeroed sums."""
    ptrs = []
    for a in bwd["args"]:
        if a["role"] in ("T", "NCL"):
            continue
        m, i = a["meaning"], a["meaning_index"]
        src = by_meaning(fwd, m, i)
        dtype = DTYPES[a["dtype"]]
        if src is not None and a["role"] not in ("output", "final_state",
                                                  "sum_state"):
            t = src["tensor"]
        else:
            shape = shape_of(a["role"], T, ncl)
            if a["role"] == "sum_state":
                t = torch.zeros(shape, dtype=dtype, device=dev)
            elif a["role"] in ("output", "final_state"):
                t = torch.full(shape, float("nan"), dtype=dtype, device=dev)
            else:
                t = (torch.rand(shape, generator=gen, device=dev) * 2 - 1).to(
                    dtype)
        a["tensor"] = t
        ptrs.append(t.data_ptr())
    return ptrs


def check_training():
    """Forward then backward kernels of every example vs torch autograd."""
    ok_all = True
    gen = torch.Generator(device=dev)
    gen.manual_seed(2)
    for name, core in CORES.items():
        SURROGATE["kind"], SURROGATE["alpha"] = SURROGATES[name]
        for dt_name, tol in (("f32", 1e-5), ("bf16", 1e-2)):
            stem = os.path.join(BUNDLE, f"{name}.{dt_name}")
            manifest = json.load(open(stem + ".json"))
            module = cp.RawModule(path=stem + ".ptx")
            ks = {k["variant"]: k for k in manifest["kernels"]}
            fwd, bwd = ks["forward"], ks["backward"]
            for T, ncl in ((0, 1000), (1, 1), (5, 4099), (64, 4096),
                           (8, 1 << 20)):
                _, fptrs = make_args(fwd, T, ncl, None, gen)
                run_kernel(module, fwd, fptrs, T, ncl)
                bptrs = fill_backward(fwd, bwd, T, ncl, gen)
                run_kernel(module, bwd, bptrs, T, ncl)
                cp.cuda.runtime.deviceSynchronize()
                exp = reference_backward(core, fwd, bwd, T, ncl)
                worst = 0.0
                for a in bwd["args"]:
                    if a["role"] not in ("output", "final_state", "sum_state"):
                        continue
                    ref = exp[(a["meaning"], a["meaning_index"])]
                    got = a["tensor"].reshape(ref.shape)
                    worst = max(worst, rel_err(got, ref))
                ok = worst <= tol
                ok_all &= ok
                print("train %-26s %-4s T=%-3d NCL=%-8d err=%.2e %s" % (
                    bwd["name"], dt_name, T, ncl, worst,
                    "ok" if ok else "FAIL"), flush=True)
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
    ks = {k["variant"]: k for k in manifest["kernels"]}
    for kernel in manifest["kernels"]:
        for T, ncl in ((8, 1 << 24), (4, 1 << 22), (32, 1 << 18),
                       (256, 1 << 16)):
            if kernel["variant"] == "backward":
                _, fptrs = make_args(ks["forward"], T, ncl, None, gen)
                ptrs = fill_backward(ks["forward"], kernel, T, ncl, gen)
                nbytes = sum(a["tensor"].numel() * a["tensor"].element_size()
                             for a in kernel["args"] if "tensor" in a)
                ms = bench(lambda: run_kernel(module, kernel, ptrs, T, ncl))
                floor = nbytes / (copy_bw * 1e9) * 1e3
                bw = nbytes / (ms * 1e-3) / 1e9
                print("%-18s %-6d %-9d %9.4f %9.4f %8.0f %6.0f%%" % (
                    kernel["name"], T, ncl, ms, floor, bw, 100 * bw / copy_bw))
                for k in (ks["forward"], kernel):
                    for a in k["args"]:
                        a.pop("tensor", None)
                torch.cuda.empty_cache()
                continue
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
    ok &= check_training()
    bench_lif()
    print("ALL CHECKS PASSED" if ok else "SOME CHECKS FAILED")
    sys.exit(0 if ok else 1)
