"""DistributedDataParallel and ZeroRedundancyOptimizer over "loom" against
single-process gradient accumulation that each rank computes itself on the
same data: bitwise equal on 2 ranks (DDP scales each rank's gradient by 1/W
and sums; accumulation adds the same two halves); on 3 and 4 ranks the sum's
order is Loom's, so within a bound (LOOM_DETERMINISTIC=1 folds in rank
order, and then it is bitwise too)."""
import pytest
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from harness import run

STEPS = 5
BATCH = 8  # per rank


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def data(step, world):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(world * BATCH, 16, generator=g), torch.randint(0, 4, (world * BATCH,), generator=g)


def optimizer(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01)


def reference(world, kind, as_ddp=False):
    """One process, every rank's micro-batch in turn: each loss scaled by 1/W
    and the gradients accumulated (single-process gradient accumulation), or,
    as_ddp, each micro-batch's gradient multiplied by 1/W and the products
    summed in rank order (DDP's arithmetic in 1.13: a multiply by the
    reciprocal, not a division, as measured; Loom's rank-order fold under
    LOOM_DETERMINISTIC=1 repeats the sum)."""
    net = model()
    opt = optimizer(kind, net.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(STEPS):
        x, y = data(step, world)
        opt.zero_grad()
        total = None
        for r in range(world):
            loss = loss_fn(net(x[r * BATCH:(r + 1) * BATCH]), y[r * BATCH:(r + 1) * BATCH])
            if not as_ddp:
                (loss / world).backward()
                continue
            grads = torch.autograd.grad(loss, list(net.parameters()))
            scaled = [g * (1.0 / world) for g in grads]
            total = scaled if total is None else [a + b for a, b in zip(total, scaled)]
        if as_ddp:
            for p, g in zip(net.parameters(), total):
                p.grad = g
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


def train(rank, world, kind, zero, as_ddp=False):
    net = DDP(model())
    if zero:
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-2,
                                      weight_decay=0.01)
    else:
        opt = optimizer(kind, net.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(STEPS):
        x, y = data(step, world)
        opt.zero_grad()
        loss_fn(net(x[rank * BATCH:(rank + 1) * BATCH]), y[rank * BATCH:(rank + 1) * BATCH]).backward()
        opt.step()
    got = [p.detach().clone() for p in net.module.parameters()]
    want = reference(world, "adamw" if zero else kind, as_ddp)
    return max((g - w).abs().max().item() for g, w in zip(got, want)), all(torch.equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("kind,zero", [("sgd", False), ("adamw", False), ("adamw", True)])
def test_two_ranks_are_bitwise_single_process_accumulation(kind, zero):
    for rank, (diff, equal) in enumerate(run(2, train, kind, zero)):
        assert equal, f"rank {rank}: {kind}{' + ZeRO' if zero else ''} differs by {diff}"


@pytest.mark.parametrize("world", [3, 4])
def test_more_ranks_track_it_and_are_bitwise_when_deterministic(world):
    # Against accumulation: 1/W applied before the sum rather than through
    # the loss, and the sum in Loom's order: float32 roundings of gradients,
    # a few ulps of 1e-1-sized parameters after 5 AdamW steps (gloo: about
    # 3e-8; measured here 4.5e-8).
    for rank, (diff, _) in enumerate(run(world, train, "adamw", False)):
        assert diff < 1e-6, f"rank {rank} of {world}: {diff}"
    # Against DDP's own arithmetic, folded in rank order: bit for bit.
    for rank, (diff, equal) in enumerate(run(world, train, "adamw", False, True, env={"LOOM_DETERMINISTIC": "1"})):
        assert equal, f"rank {rank} of {world}, deterministic: {diff}"


def train_no_sync(rank, world, accumulate=3):
    """`accumulate` micro-batches a step, all but the last under no_sync():
    DDP all-reduces once, the sum of what each rank accumulated."""
    net = DDP(model())
    opt = optimizer("sgd", net.parameters())
    ref = model()
    ref_opt = optimizer("sgd", ref.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(STEPS):
        x, y = data(step, world * accumulate)
        rows = lambda m, r: slice((m * world + r) * BATCH, (m * world + r + 1) * BATCH)  # noqa: E731
        opt.zero_grad()
        for m in range(accumulate - 1):
            with net.no_sync():
                loss_fn(net(x[rows(m, rank)]), y[rows(m, rank)]).backward()
        loss_fn(net(x[rows(accumulate - 1, rank)]), y[rows(accumulate - 1, rank)]).backward()
        opt.step()
        ref_opt.zero_grad()
        for m in range(accumulate):
            for r in range(world):
                (loss_fn(ref(x[rows(m, r)]), y[rows(m, r)]) / world).backward()
        ref_opt.step()
    return max((p.detach() - q.detach()).abs().max().item() for p, q in zip(net.module.parameters(), ref.parameters()))


@pytest.mark.parametrize("world", [2, 3])
def test_no_sync_accumulates_then_all_reduces_once(world):
    # The same sums in other orders (accumulated locally, then across ranks):
    # float32 roundings, a few ulps of the parameters after 5 SGD steps.
    for rank, diff in enumerate(run(world, train_no_sync)):
        assert diff < 1e-6, f"rank {rank} of {world}: {diff}"
