"""A rank that dies mid-job: the others' wait() raises, naming it, within the
group's timeout (well before it: the watchdog hears of a dead process in
milliseconds), and nothing hangs."""
import os
import signal
import time

import torch
import torch.distributed as dist

from harness import run


def die_or_wait(rank, world):
    t = torch.ones(1 << 16)
    dist.all_reduce(t)  # everyone is up
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        for _ in range(1000):
            dist.all_reduce(t, async_op=True).wait()
        return "no error", 0.0
    except RuntimeError as e:
        return str(e), time.monotonic() - start


def test_a_killed_rank_makes_wait_raise_naming_it():
    import multiprocessing
    import queue as queues

    import harness

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        procs = [ctx.Process(target=harness._entry, args=(die_or_wait, r, 3, f"file://{d}/store", q, (), {}))
                 for r in range(3)]
        for p in procs:
            p.start()
        results = {}
        try:
            while len(results) < 2:
                rank, error, result = q.get(timeout=90)
                results[rank] = (error, result)
        except queues.Empty:
            pass
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert procs[1].exitcode == -signal.SIGKILL
    for rank in (0, 2):
        error, result = results[rank]
        assert error is None, error
        message, seconds = result
        assert "rank 1" in message, message
        assert seconds < 20, f"rank {rank} took {seconds} s"
