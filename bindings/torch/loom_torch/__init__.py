"""Loom as a torch.distributed backend.

    import loom_torch
    torch.distributed.init_process_group("loom", init_method=..., rank=..., world_size=...)

Importing the package registers the backend "loom"; every collective and
point-to-point call of torch.distributed then runs on Loom (CPU tensors).
"""
import torch.distributed as _dist

from . import _C

if "LOOM" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("loom", _C.create_process_group)

__all__ = []
