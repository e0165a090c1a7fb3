"""Every torch.distributed collective and point-to-point call on the "loom"
backend, for every dtype Loom has, against what each rank computes itself:
exactly (small integer values are exact in every dtype, bf16 and fp16 too).
Among them the calls Debian's gloo lacks: reduce_scatter (list and tensor),
all_gather_into_tensor and bf16."""
import pytest
import torch
import torch.distributed as dist

from harness import run

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8,
          torch.uint8]
N = 257  # odd: splits unevenly


def values(rank, dtype, n=N, offset=0):
    """Rank r's tensor: 1, 2 or 3 by position, so that sums, products and
    averages of four ranks stay small integers, exact in every dtype."""
    return ((torch.arange(n) + rank + offset) % 3 + 1).to(dtype)


def folded(world, dtype, op, n=N):
    parts = [values(r, torch.float64, n) for r in range(world)]
    if op == dist.ReduceOp.SUM:
        out = sum(parts)
    elif op == dist.ReduceOp.PRODUCT:
        out = torch.stack(parts).prod(0)
    elif op == dist.ReduceOp.MIN:
        out = torch.stack(parts).min(0).values
    elif op == dist.ReduceOp.MAX:
        out = torch.stack(parts).max(0).values
    else:  # AVG: floats divide, integers truncate toward zero (NCCL's and Loom's)
        total = sum(parts)
        out = total / world if dtype.is_floating_point else torch.div(total, world, rounding_mode="trunc")
    return out.to(dtype)


def check(failures, what, got, want):
    if not torch.equal(got, want):
        failures.append(f"{what}: got {got.flatten()[:6].tolist()}, want {want.flatten()[:6].tolist()}")


def collectives(rank, world):
    failures = []
    root = world - 1
    for dtype in DTYPES:
        name = str(dtype)
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.AVG):
            t = values(rank, dtype)
            dist.all_reduce(t, op)
            check(failures, f"all_reduce {name} {op}", t, folded(world, dtype, op))
            t = values(rank, dtype)
            dist.reduce(t, root, op)
            if rank == root:
                check(failures, f"reduce {name} {op}", t, folded(world, dtype, op))
        t = values(rank, dtype)
        dist.broadcast(t, root)
        check(failures, f"broadcast {name}", t, values(root, dtype))
        outs = [torch.empty(N, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, values(rank, dtype))
        for r in range(world):
            check(failures, f"all_gather {name} from {r}", outs[r], values(r, dtype))
        flat = torch.empty(N * world, dtype=dtype)
        dist.all_gather_into_tensor(flat, values(rank, dtype))
        check(failures, f"all_gather_into_tensor {name}", flat, torch.cat([values(r, dtype) for r in range(world)]))
        gathered = [torch.empty(N, dtype=dtype) for _ in range(world)] if rank == root else None
        dist.gather(values(rank, dtype), gathered, dst=root)
        if rank == root:
            for r in range(world):
                check(failures, f"gather {name} from {r}", gathered[r], values(r, dtype))
        out = torch.empty(N, dtype=dtype)
        pieces = [values(root, dtype, offset=r) for r in range(world)] if rank == root else None
        dist.scatter(out, pieces, src=root)
        check(failures, f"scatter {name}", out, values(root, dtype, offset=rank))
        # Reduce-scatter: block b of every rank's input is values(rank, offset=b).
        out = torch.empty(N, dtype=dtype)
        dist.reduce_scatter(out, [values(rank, dtype, offset=b) for b in range(world)])
        want = sum(values(r, torch.float64, offset=rank) for r in range(world)).to(dtype)
        check(failures, f"reduce_scatter {name}", out, want)
        out = torch.empty(N, dtype=dtype)
        dist.reduce_scatter_tensor(out, torch.cat([values(rank, dtype, offset=b) for b in range(world)]))
        check(failures, f"reduce_scatter_tensor {name}", out, want)
        # All-to-all: rank s sends block d = values(s, offset=d) to rank d.
        outs = [torch.empty(N, dtype=dtype) for _ in range(world)]
        dist.all_to_all(outs, [values(rank, dtype, offset=d) for d in range(world)])
        for s in range(world):
            check(failures, f"all_to_all {name} from {s}", outs[s], values(s, dtype, offset=rank))
    # all_to_all_single, even and uneven (rank s sends s + d + 1 rows to d).
    rows = 3
    src = torch.arange(world * rows * 4, dtype=torch.float32).reshape(world * rows, 4) + 1000 * rank
    dst = torch.empty_like(src)
    dist.all_to_all_single(dst, src)
    for s in range(world):
        want = torch.arange(world * rows * 4, dtype=torch.float32).reshape(world * rows, 4)[rank * rows:(rank + 1) * rows] + 1000 * s
        check(failures, f"all_to_all_single from {s}", dst[s * rows:(s + 1) * rows], want)
    send_splits = [rank + d + 1 for d in range(world)]
    recv_splits = [s + rank + 1 for s in range(world)]
    src = torch.cat([torch.full((send_splits[d], 2), float(100 * rank + d)) for d in range(world)])
    dst = torch.empty(sum(recv_splits), 2)
    dist.all_to_all_single(dst, src, recv_splits, send_splits)
    want = torch.cat([torch.full((recv_splits[s], 2), float(100 * s + rank)) for s in range(world)])
    check(failures, "all_to_all_single uneven", dst, want)
    # Bool: SUM is or, PRODUCT is and (NCCL's mapping).
    flags = torch.tensor([rank == 0, False, True])
    dist.all_reduce(flags)
    check(failures, "all_reduce bool sum", flags, torch.tensor([True, False, True]))
    flags = torch.tensor([rank == 0, True, True])
    dist.all_reduce(flags, dist.ReduceOp.PRODUCT)
    check(failures, "all_reduce bool product", flags, torch.tensor([world == 1, True, True]))
    # PREMUL_SUM: each rank's input times 0.5, then summed.
    t = torch.full((N,), 2.0 * (rank + 1))
    dist.all_reduce(t, dist._make_nccl_premul_sum(0.5))
    check(failures, "all_reduce premul_sum", t, torch.full((N,), float(world * (world + 1) // 2)))
    # Complex numbers, as pairs of reals: summed, gathered.
    z = torch.complex(values(rank, torch.float32), -values(rank, torch.float32, offset=1))
    dist.all_reduce(z)
    check(failures, "all_reduce complex64",
          z, torch.complex(folded(world, torch.float32, dist.ReduceOp.SUM),
                           -sum(values(r, torch.float32, offset=1) for r in range(world))))
    zs = [torch.empty(N, dtype=torch.complex64) for _ in range(world)]
    dist.all_gather(zs, torch.complex(values(rank, torch.float32), values(rank, torch.float32)))
    for r in range(world):
        check(failures, f"all_gather complex64 from {r}", zs[r],
              torch.complex(values(r, torch.float32), values(r, torch.float32)))
    # all_gather_coalesced: outputs[r][i] is input i of rank r.
    ins = [values(rank, torch.float32), values(rank, torch.float32, n=5)]
    outs = [[torch.empty(N), torch.empty(5)] for _ in range(world)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(world):
        check(failures, f"all_gather_coalesced from {r}", outs[r][0], values(r, torch.float32))
        check(failures, f"all_gather_coalesced from {r} (second)", outs[r][1], values(r, torch.float32, n=5))
    # Several tensors at once.
    ts = [values(rank, torch.float32), values(rank, torch.float32, n=7)]
    dist.all_reduce_coalesced(ts)
    check(failures, "all_reduce_coalesced 0", ts[0], folded(world, torch.float32, dist.ReduceOp.SUM))
    check(failures, "all_reduce_coalesced 1", ts[1], folded(world, torch.float32, dist.ReduceOp.SUM, n=7))
    # Asynchronous, through the future DDP's hooks use.
    t = values(rank, torch.float32)
    work = dist.all_reduce(t, async_op=True)
    got = work.get_future().wait()[0]
    check(failures, "all_reduce future", got, folded(world, torch.float32, dist.ReduceOp.SUM))
    # Send and receive around the ring, blocking and not.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    out = torch.empty(N)
    if rank % 2 == 0:
        dist.send(torch.full((N,), float(rank)), nxt)
        dist.recv(out, prv)
    else:
        dist.recv(out, prv)
        dist.send(torch.full((N,), float(rank)), nxt)
    check(failures, "send/recv", out, torch.full((N,), float(prv)))
    reqs = [dist.isend(torch.full((N,), float(rank)), nxt), dist.irecv(out, prv)]
    for req in reqs:
        req.wait()
    check(failures, "isend/irecv", out, torch.full((N,), float(prv)))
    # batch_isend_irecv: every rank receives first, 4 MiB each way, which
    # no transport buffers whole; only a group lets both sides go on.
    big = 1 << 20
    got = [torch.empty(big) for _ in range(world)]
    ops = [dist.P2POp(dist.irecv, got[p], p) for p in range(world) if p != rank]
    ops += [dist.P2POp(dist.isend, torch.full((big,), float(10 * rank + p)), p) for p in range(world) if p != rank]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    for p in range(world):
        if p != rank:
            check(failures, f"batch_isend_irecv from {p}", got[p], torch.full((big,), float(10 * p + rank)))
    dist.barrier()
    return failures


@pytest.mark.parametrize("world", [2, 3])
def test_every_collective_and_dtype_is_exact(world):
    for rank, failures in enumerate(run(world, collectives)):
        assert not failures, f"rank {rank}: " + "\n".join(failures)


def coalesced(call):
    """call() between the start and end of coalescing, as batch_isend_irecv does."""
    group = dist.distributed_c10d._get_default_group()
    group._start_coalescing()
    try:
        call()
    finally:
        group._end_coalescing([])


def refusals(rank, world):
    said = {}
    t = torch.ones(4, dtype=torch.int32)
    for name, call in [
        ("bitwise", lambda: dist.all_reduce(t, dist.ReduceOp.BAND)),
        ("non-contiguous", lambda: dist.all_reduce(torch.ones(4, 4).t())),
        ("int16", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16))),
        ("any source", lambda: dist.recv(torch.empty(4))),
        ("coalesced all_reduce", lambda: coalesced(lambda: dist.all_reduce(t))),
    ]:
        try:
            call()
            said[name] = None
        except RuntimeError as e:
            said[name] = str(e)
    dist.barrier()
    return said


def test_what_loom_cannot_do_is_refused_by_name():
    said = run(2, refusals)[0]
    assert "bitwise" in said["bitwise"], said
    assert "contiguous" in said["non-contiguous"], said
    assert "Short" in said["int16"] and "not a type Loom" in said["int16"], said
    assert said["any source"] is not None and "source" in said["any source"], said
    assert "only isend and irecv" in said["coalesced all_reduce"], said


def init_methods(rank, world):
    t = torch.ones(3)
    dist.all_reduce(t)
    return t.tolist()


@pytest.mark.parametrize("scheme", ["env", "tcp", "file"])
def test_every_init_method_starts_a_job(scheme):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    init = {"env": "env://", "tcp": f"tcp://127.0.0.1:{port}", "file": None}[scheme]
    assert run(2, init_methods, env=env, init=init) == [[2.0, 2.0, 2.0]] * 2
