"""Loom as a torch.distributed backend.

    import loom_torch
    torch.distributed.init_process_group("loom", init_method=..., rank=..., world_size=...)

Importing the package registers the backend "loom"; every collective and
point-to-point call of torch.distributed then runs on Loom (CPU tensors, and
CUDA tensors where Loom is built with CUDA).
"""
import inspect as _inspect

import torch.distributed as _dist

from . import _C

if "LOOM" not in _dist.Backend._plugins:
    # PyTorch 2 asks which devices a plug-in serves (and warns, assuming
    # these two, when it is not told); 1.13 has no such argument.
    if "devices" in _inspect.signature(_dist.Backend.register_backend).parameters:
        _dist.Backend.register_backend("loom", _C.create_process_group, devices=["cpu", "cuda"])
    else:
        _dist.Backend.register_backend("loom", _C.create_process_group)

__all__ = []
