"""Runs a function as every rank of a torch.distributed job on the "loom"
backend, each rank a process of its own (spawned), and returns what each
rank returned; a rank that raised fails the caller with its traceback."""
import datetime
import multiprocessing
import os
import queue as queues
import tempfile
import traceback

TIMEOUT_S = 120


def _entry(fn, rank, world, init, queue, args, env):
    import faulthandler
    faulthandler.enable()  # a crash names where it happened
    try:
        os.environ.update(env)
        import torch.distributed as dist
        import loom_torch  # noqa: F401 (registers "loom")

        dist.init_process_group("loom", init_method=init, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        result = fn(rank, world, *args)
        dist.destroy_process_group()
        queue.put((rank, None, result))
    except BaseException:  # noqa: B902 (the test wants every failure, named)
        queue.put((rank, traceback.format_exc(), None))


def run(world, fn, *args, env=None, init=None):
    """fn(rank, world, *args) on `world` ranks; returns their results by rank."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as scratch:
        init = init or f"file://{scratch}/store"
        procs = [ctx.Process(target=_entry, args=(fn, r, world, init, queue, args, env or {}))
                 for r in range(world)]
        for p in procs:
            p.start()
        results, errors = {}, []
        try:
            for _ in range(world):
                try:
                    rank, error, result = queue.get(timeout=TIMEOUT_S)
                except queues.Empty:
                    codes = {r: p.exitcode for r, p in enumerate(procs)}
                    raise AssertionError(f"no answer from every rank within {TIMEOUT_S} s; exit codes {codes}, "
                                         f"answered {sorted(results)}") from None
                if error:
                    errors.append(f"rank {rank}:\n{error}")
                results[rank] = result
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
    assert not errors, "\n".join(errors)
    return [results[r] for r in range(world)]
