#!/usr/bin/env python3
"""torch.distributed through one backend, checked: every collective and
point-to-point form exactly, and DDP against a single-process reference.
Ranks are processes sharing one device (CUDA device 0, or the CPU). For the
GPU machine, where PyTorch 2 has CUDA: "nccl" with Loom's libnccl.so.2
preloaded (NVIDIA's NCCL refuses two ranks on one GPU), and "loom" through
a loom_torch built here for that PyTorch. CI runs it with "loom" on the CPU
under Debian's PyTorch 1.13, which keeps this script honest.

  torch_on_device.py build DIR LOOM_LIBDIR
      compiles bindings/torch against this interpreter's torch with g++
      (no CMake or ninja needed) into DIR/loom_torch, linked to
      LOOM_LIBDIR/libloom.so; put DIR on PYTHONPATH.
  torch_on_device.py check --backend B --device cpu|cuda [--world N] [--expect-nccl PATH]
      runs the checks on N ranks (2); --expect-nccl: fail unless every
      nccl* symbol PyTorch's CUDA library imports resolves to PATH (preloaded:
      PyTorch's wheel maps NVIDIA's libnccl.so.2 too, by its RPATH, and a
      preloaded library's symbols come first). Exit status 1 names each failure.
"""
import argparse
import datetime
import glob
import inspect
import multiprocessing
import os
import queue as queues
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 300
N = 4097  # elements per rank: odd, past a page


def build(out, libdir):
    import torch
    from torch.utils import cpp_extension

    pkg = os.path.join(out, "loom_torch")
    os.makedirs(pkg, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "bindings/torch/loom_torch/__init__.py"), pkg)
    sources = sorted(glob.glob(os.path.join(ROOT, "bindings/torch/*.cpp")))  # what CMake's target lists
    # The flags torch's own extension builder gives: the C++ ABI torch was
    # built with, and pybind11's, so that our module and torch's share types
    # (the Backend we return is one of torch's).
    abi = []
    for name in ("_get_pybind11_abi_build_flags", "_get_glibcxx_abi_build_flags"):
        if hasattr(cpp_extension, name):
            abi += getattr(cpp_extension, name)()
    if not any("GLIBCXX_USE_CXX11_ABI" in f for f in abi):
        abi.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
    includes = [f"-I{ROOT}", f"-I{os.path.join(ROOT, 'include')}"]
    # torch's and Python's as system headers: their warnings are not ours.
    for system in [sysconfig.get_paths()["include"]] + cpp_extension.include_paths():
        includes += ["-isystem", system]
    torch_lib = cpp_extension.library_paths()[0]
    # Each source compiled at once, in parallel (torch's headers make each
    # take most of a minute), then linked.
    compile_flags = ["-O2", "-g1", "-std=c++20", "-fPIC", "-DTORCH_EXTENSION_NAME=_C",
                     "-DTORCH_API_INCLUDE_EXTENSION_H"] + abi + includes
    objects = [os.path.join(out, os.path.basename(src) + ".o") for src in sources]
    compiles = [subprocess.Popen(["g++"] + compile_flags + ["-c", src, "-o", obj])
                for src, obj in zip(sources, objects)]
    failed = [src for src, proc in zip(sources, compiles) if proc.wait() != 0]
    if failed:
        raise SystemExit(f"torch_on_device.py build: {', '.join(failed)} did not compile")
    target = os.path.join(pkg, "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
    link = (["g++", "-shared"] + objects +
            [f"-L{torch_lib}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python", f"-L{libdir}", "-lloom",
             f"-Wl,-rpath,{libdir}", f"-Wl,-rpath,{torch_lib}", "-o", target])
    subprocess.run(link, check=True)
    print(f"loom_torch for torch {torch.__version__} in {pkg}")


# ---- the checks: each returns None, or what went wrong ----

def same(got, want, what):
    if got.shape != want.shape:
        return f"{what}: shape {tuple(got.shape)}, want {tuple(want.shape)}"
    bad = (got.cpu() != want.cpu()).nonzero()
    if len(bad):
        i = tuple(bad[0].tolist())
        return f"{what}: {len(bad)} elements differ, first at {i}: {got.cpu()[i].item()} want {want.cpu()[i].item()}"
    return None


def checks():
    import torch
    import torch.distributed as dist

    def all_reduce_sum(r, w, dev):
        x = torch.arange(N, dtype=torch.int32, device=dev) + 1000 * r
        dist.all_reduce(x)
        return same(x, w * torch.arange(N, dtype=torch.int32) + 1000 * sum(range(w)), "sum int32")

    def all_reduce_avg(r, w, dev):  # (2 + 4 + ... + 2w) / w = w + 1, exact
        x = torch.full((N,), 2.0 * (r + 1), device=dev)
        dist.all_reduce(x, dist.ReduceOp.AVG)
        return same(x, torch.full((N,), float(w + 1)), "avg float32")

    def all_reduce_premul(r, w, dev):
        x = torch.full((N,), float(r + 1), device=dev)
        dist.all_reduce(x, dist._make_nccl_premul_sum(2.0))
        return same(x, torch.full((N,), float(w * (w + 1))), "premul_sum float32")

    def all_reduce_max_bf16(r, w, dev):
        x = torch.full((N,), float(r), dtype=torch.bfloat16, device=dev)
        dist.all_reduce(x, dist.ReduceOp.MAX)
        return same(x, torch.full((N,), float(w - 1), dtype=torch.bfloat16), "max bfloat16")

    def broadcast(r, w, dev):
        root = w - 1
        x = (torch.arange(N, device=dev) if r == root else torch.zeros(N, device=dev)).to(torch.int64)
        dist.broadcast(x, root)
        return same(x, torch.arange(N), "broadcast int64")

    def all_gather(r, w, dev):
        x = torch.full((N,), r, dtype=torch.int32, device=dev)
        out = torch.empty(w * N, dtype=torch.int32, device=dev)
        dist.all_gather_into_tensor(out, x)
        want = torch.arange(w, dtype=torch.int32).repeat_interleave(N)
        outs = [torch.empty(N, dtype=torch.int32, device=dev) for _ in range(w)]
        dist.all_gather(outs, x)
        return same(out, want, "all_gather_into_tensor") or same(torch.cat(outs), want, "all_gather")

    def reduce_scatter(r, w, dev):
        x = torch.arange(w * N, dtype=torch.int32, device=dev) + r
        out = torch.empty(N, dtype=torch.int32, device=dev)
        dist.reduce_scatter_tensor(out, x)
        return same(out, w * torch.arange(r * N, (r + 1) * N, dtype=torch.int32) + sum(range(w)), "reduce_scatter")

    def all_to_all(r, w, dev):
        m = 33
        x = torch.arange(w * m, device=dev) + 1000 * r
        out = torch.empty(w * m, dtype=x.dtype, device=dev)
        dist.all_to_all_single(out, x)
        want = torch.cat([torch.arange(r * m, (r + 1) * m) + 1000 * q for q in range(w)])
        wrong = same(out, want, "all_to_all_single even")
        # Uneven: rank r sends r + p + 1 rows to p, each 1000 r + 10 p + k.
        send = [r + p + 1 for p in range(w)]
        recv = [q + r + 1 for q in range(w)]
        x = torch.cat([torch.arange(s) + 1000 * r + 10 * p for p, s in enumerate(send)]).to(dev)
        out = torch.empty(sum(recv), dtype=x.dtype, device=dev)
        dist.all_to_all_single(out, x, recv, send)
        want = torch.cat([torch.arange(s) + 1000 * q + 10 * r for q, s in enumerate(recv)])
        return wrong or same(out, want, "all_to_all_single uneven")

    def send_recv(r, w, dev):  # 8 MiB round the ring: even ranks send first, odd ones receive first
        x = torch.full((2 << 20,), float(r), device=dev)
        y = torch.empty_like(x)
        nxt, prv = (r + 1) % w, (r - 1) % w
        if r % 2 == 0:
            dist.send(x, nxt)
            dist.recv(y, prv)
        else:
            dist.recv(y, prv)
            dist.send(x, nxt)
        return same(y, torch.full_like(y.cpu(), float(prv)), "send/recv")

    def batch_isend_irecv(r, w, dev):  # every rank sends 8 MiB first: only a batch makes that safe
        x = torch.full((2 << 20,), float(r), device=dev)
        y = torch.empty_like(x)
        nxt, prv = (r + 1) % w, (r - 1) % w
        for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, y, prv)]):
            work.wait()
        return same(y, torch.full_like(y.cpu(), float(prv)), "batch_isend_irecv")

    def gather_scatter(r, w, dev):
        x = torch.full((N,), r, dtype=torch.int32, device=dev)
        outs = [torch.empty_like(x) for _ in range(w)] if r == 0 else None
        dist.gather(x, outs, dst=0)
        wrong = same(torch.cat(outs), torch.arange(w, dtype=torch.int32).repeat_interleave(N), "gather") \
            if r == 0 else None
        ins = [torch.full((N,), 7 * p, dtype=torch.int32, device=dev) for p in range(w)] if r == 0 else None
        y = torch.empty_like(x)
        dist.scatter(y, ins, src=0)
        return wrong or same(y, torch.full((N,), 7 * r, dtype=torch.int32), "scatter")

    def coalesced(r, w, dev):  # PyTorch 2's coalescing manager: one coalesced call for the pair
        outs = [torch.empty(w * N, dtype=torch.int32, device=dev) for _ in range(2)]
        reduced = [torch.empty(N, dtype=torch.int32, device=dev) for _ in range(2)]
        with dist.distributed_c10d._coalescing_manager(device=torch.device(dev), async_ops=True) as cm:
            for i in range(2):
                dist.all_gather_into_tensor(outs[i], torch.full((N,), 10 * i + r, dtype=torch.int32, device=dev))
        cm.wait()
        with dist.distributed_c10d._coalescing_manager(device=torch.device(dev), async_ops=True) as cm:
            for i in range(2):
                dist.reduce_scatter_tensor(reduced[i], torch.full((w * N,), i + r, dtype=torch.int32, device=dev))
        cm.wait()
        for i in range(2):
            wrong = same(outs[i], (10 * i + torch.arange(w, dtype=torch.int32)).repeat_interleave(N),
                         f"coalesced all_gather_into_tensor {i}") or \
                same(reduced[i], torch.full((N,), w * i + sum(range(w)), dtype=torch.int32),
                     f"coalesced reduce_scatter_tensor {i}")
            if wrong:
                return wrong
        return None

    def barrier(r, w, dev):
        dist.barrier()
        return None

    found = [all_reduce_sum, all_reduce_max_bf16, broadcast, all_gather, reduce_scatter, all_to_all, send_recv,
             batch_isend_irecv, gather_scatter, barrier]
    found += [all_reduce_avg]
    if hasattr(dist, "_make_nccl_premul_sum"):
        found += [all_reduce_premul]
    manager = getattr(dist.distributed_c10d, "_coalescing_manager", None)
    if manager and "async_ops" in inspect.signature(manager).parameters:  # PyTorch 2.1 on
        found += [coalesced]
    return found


def ddp(r, w, dev):
    """5 SGD steps of DDP against one process stepping on the mean of the
    ranks' losses. Bound 1e-5 relative (1e-6 absolute): each step's
    gradient differs from the reference's only by the order of a sum of w
    float32 terms (a few units of 2^-23), and 5 steps of lr 0.1 on weights of
    order 1 carry that over nearly unchanged."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8)).to(dev)

    data = torch.Generator().manual_seed(1)
    batches = [(torch.randn(16, 32, generator=data), torch.randn(16, 8, generator=data)) for _ in range(w * 5)]
    batches = [(x.to(dev), y.to(dev)) for x, y in batches]
    net, ref = DistributedDataParallel(model()), model()
    opt, ref_opt = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(5):
        x, y = batches[step * w + r]
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
        ref_opt.zero_grad()
        mean = sum(torch.nn.functional.mse_loss(ref(xq), yq) for xq, yq in batches[step * w:(step + 1) * w]) / w
        mean.backward()
        ref_opt.step()
    for (name, p), q in zip(net.module.named_parameters(), ref.parameters()):
        if not torch.allclose(p, q, rtol=1e-5, atol=1e-6):
            return f"ddp: {name} is {(p - q).abs().max().item():.3g} from the reference"
    return None


def loaded_nccl():
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "libnccl" in line and line.split()[-1].startswith("/")})


def torch_nccl_imports():
    """The nccl* symbols PyTorch's CUDA library imports."""
    import torch
    lib = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda*.so"))[0]
    out = subprocess.run(["nm", "-D", "--undefined-only", lib], capture_output=True, text=True, check=True).stdout
    return sorted({line.split()[-1].split("@")[0] for line in out.splitlines()
                   if line.split() and line.split()[-1].startswith("nccl")})


def owners(names):
    """name -> the file whose definition the process's global lookup finds (what an import binds
    to), or None where none does."""
    import ctypes

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

    scope = ctypes.CDLL(None)
    dladdr = scope.dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    found = {}
    for name in names:
        try:
            address = ctypes.cast(getattr(scope, name), ctypes.c_void_p).value
        except AttributeError:
            found[name] = None
            continue
        info = DlInfo()
        found[name] = os.path.realpath(info.fname.decode()) if dladdr(address, ctypes.byref(info)) else None
    return found


def nccl_bound_to(want):
    """None if every nccl* import of PyTorch's CUDA library resolves to `want`, else what does not."""
    names = torch_nccl_imports()
    if not names:
        return "PyTorch's CUDA library imports no nccl* symbol: nothing to check"
    wrong = {n: f for n, f in owners(names).items() if f != want}
    if wrong:
        shown = ", ".join(f"{n} -> {f}" for n, f in sorted(wrong.items())[:5])
        return f"{len(wrong)} of {len(names)} nccl symbols resolve elsewhere: {shown} (mapped: {loaded_nccl()})"
    return None


def rank_main(r, w, backend, device, init, expect_nccl, results):
    try:
        import torch
        import torch.distributed as dist
        if backend == "loom":
            import loom_torch  # noqa: F401 (registers "loom")
        dev = "cpu"
        if device == "cuda":
            torch.cuda.set_device(0)  # every rank on GPU 0: what NVIDIA's NCCL refuses
            dev = "cuda:0"
        dist.init_process_group(backend, init_method=init, rank=r, world_size=w,
                                timeout=datetime.timedelta(seconds=120))
        said = []
        if expect_nccl:
            torch.zeros(1, device=dev).sum()  # NCCL is loaded by now (libtorch_cuda needs it)
            said.append(("libnccl", nccl_bound_to(os.path.realpath(expect_nccl))))
        for check in checks():
            try:
                said.append((check.__name__, check(r, w, dev)))
            except Exception:  # noqa: B902 (a check that raises is a failure, named)
                said.append((check.__name__, traceback.format_exc(limit=3)))
        said.append(("ddp", ddp(r, w, dev)))
        dist.destroy_process_group()
        results.put((r, said))
    except BaseException:  # noqa: B902
        results.put((r, [("rank", traceback.format_exc())]))


def check_main(args):
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        init = f"file://{scratch}/store"
        procs = [ctx.Process(target=rank_main,
                             args=(r, args.world, args.backend, args.device, init, args.expect_nccl, results))
                 for r in range(args.world)]
        for p in procs:
            p.start()
        by_rank = {}
        try:
            for _ in range(args.world):
                r, said = results.get(timeout=TIMEOUT_S)
                by_rank[r] = said
        except queues.Empty:
            print(f"FAIL no answer from ranks {sorted(set(range(args.world)) - set(by_rank))} in {TIMEOUT_S} s")
            failed += 1
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
    for r in sorted(by_rank):
        for name, wrong in by_rank[r]:
            if wrong:
                failed += 1
                print(f"FAIL rank {r} {name}: {wrong}")
            elif r == 0:
                print(f"ok   {name}")
    import torch
    print(f"{args.backend} on {args.device}, {args.world} ranks, torch {torch.__version__}: "
          f"{'all passed' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("libdir")
    c = sub.add_parser("check")
    c.add_argument("--backend", required=True, choices=["loom", "nccl"])
    c.add_argument("--device", required=True, choices=["cpu", "cuda"])
    c.add_argument("--world", type=int, default=2)
    c.add_argument("--expect-nccl", default="")
    args = parser.parse_args()
    if args.command == "build":
        build(os.path.abspath(args.out), os.path.abspath(args.libdir))
        return 0
    return check_main(args)


if __name__ == "__main__":
    sys.exit(main())
