"""PyTorch's own distributed test suite (Debian ships
torch/testing/_internal/distributed/distributed_test.py, not its launcher),
run on a backend named by BACKEND: "loom" (registered by import loom_torch)
or "gloo" for comparison. Upstream's test_distributed_spawn.py builds the
same class from the same two bases; what is Loom's here is making the suite
run on Debian's Python 3.11 and on a plugin backend:

- expecttest (a PyPI module Debian lacks) is stubbed: the suite uses only
  its ACCEPT flag and TestCase;
- torch.distributed._shard's metadata module declares a dataclass field
  with a mutable default, which Python 3.11 refuses; it is rewritten with a
  default factory as it is imported;
- "loom" joins the suite's sets of plugin, DDP, subgroup and "gpu" backends
  (the last gates tests gloo runs on CPU too), and of those without a receive
  from any source, before the suite reads them.

    BACKEND=loom WORLD_SIZE=2 TEMP_DIR=$(mktemp -d) python3 launcher.py [-v] [-k PATTERN]
"""
import importlib.abc
import importlib.machinery
import os
import sys
import types
import unittest


def _stub_expecttest():
    stub = types.ModuleType("expecttest")
    stub.ACCEPT = False
    stub.TestCase = unittest.TestCase
    sys.modules.setdefault("expecttest", stub)


class _MetadataFix(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads torch.distributed._shard.sharded_tensor.metadata with its one
    mutable dataclass default turned into a default factory."""

    NAME = "torch.distributed._shard.sharded_tensor.metadata"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.NAME:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            return None
        self.origin = spec.origin
        return importlib.machinery.ModuleSpec(fullname, self, origin=spec.origin)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(self.origin) as f:
            source = f.read()
        source = source.replace("field(default=TensorProperties())", "field(default_factory=TensorProperties)")
        module.__file__ = self.origin
        exec(compile(source, self.origin, "exec"), module.__dict__)


_stub_expecttest()
sys.meta_path.insert(0, _MetadataFix())

BACKEND = os.environ["BACKEND"]
if BACKEND == "loom":
    import loom_torch  # noqa: F401 (registers "loom")
    from torch.testing._internal.common_distributed import DistTestCases

    # "gpu" gates tests that run on CPU with gloo too (object collectives, ...)
    # and need GPUs only for NCCL; "cuda" (CUDA tensors) Loom does not join yet.
    for feature in ("plugin", "ddp", "subgroup", "gpu"):
        DistTestCases.backend_feature[feature].add("loom")
    DistTestCases.skip_collective["sendrecv anysource"].add("loom")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

# Tests the suite runs on gloo alone by naming it, though what they test is
# no gloo feature: all-reduce of several tensors at once, futures of works,
# scattered objects, batched isend/irecv on CPU, a barrier's timeout. They run
# on loom too. (Left gloo's: its monitored barrier, which torch.distributed
# offers gloo alone, a receive from any source and sparse tensors, which
# Loom lacks.)
LOOM_ALSO = [
    "test_barrier_timeout_full_group", "test_barrier_timeout_group",
    "test_all_reduce_coalesced_group_max", "test_all_reduce_coalesced_group_min",
    "test_all_reduce_coalesced_group_product", "test_all_reduce_coalesced_group_sum",
    "test_all_reduce_coalesced_full_group_max", "test_all_reduce_coalesced_full_group_min",
    "test_all_reduce_coalesced_full_group_product", "test_all_reduce_coalesced_full_group_sum",
    "test_all_reduce_coalesced_max", "test_all_reduce_coalesced_min", "test_all_reduce_coalesced_product",
    "test_all_reduce_coalesced_sum", "test_batch_isend_irecv_gloo", "test_batch_isend_irecv_gloo_tags",
    "test_get_future", "test_scatter_object_list",
]
# DDP's no_sync tests build their model only where the module's BACKEND is
# gloo, mpi or nccl, and gloo's branch is the CPU one. The group is loom's
# (made in setUp); the body reads BACKEND as "gloo" while it runs.
NO_SYNC = [
    "test_accumulate_gradients_no_sync", "test_accumulate_gradients_no_sync_allreduce_hook",
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook", "test_accumulate_gradients_no_sync_grad_is_view",
]


def _as_gloo_cpu_body(test):
    import functools
    from torch.testing._internal.distributed import distributed_test

    @functools.wraps(test)
    def body(*args, **kwargs):
        distributed_test.BACKEND = "gloo"
        try:
            return test(*args, **kwargs)
        finally:
            distributed_test.BACKEND = BACKEND
    return body


if BACKEND == "loom":
    for _name in NO_SYNC:
        setattr(DistributedTest._DistTestBase, _name, _as_gloo_cpu_body(getattr(DistributedTest._DistTestBase, _name)))
    for _name in LOOM_ALSO + NO_SYNC:
        getattr(DistributedTest._DistTestBase, _name).__unittest_skip__ = False


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _Recording(unittest.TextTestResult):
    """Every test's outcome, for tests/torch_suite/run (LOOM_SUITE_RESULTS)."""

    outcomes = {}

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[test._testMethodName] = "passed"

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[test._testMethodName] = "failed"

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[test._testMethodName] = "failed"

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[test._testMethodName] = "skipped"

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.outcomes[test._testMethodName] = "passed"

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes[test._testMethodName] = "failed"


if __name__ == "__main__":
    results = os.environ.get("LOOM_SUITE_RESULTS")
    if results is None:
        run_tests()
    else:
        import json
        patterns = os.environ.get("LOOM_SUITE_FILTER", "").split(",")
        tests = unittest.defaultTestLoader.loadTestsFromTestCase(TestDistBackendWithSpawn)
        tests = unittest.TestSuite(t for t in tests if any(p in t._testMethodName for p in patterns))
        unittest.TextTestRunner(resultclass=_Recording, verbosity=1).run(tests)
        with open(results, "w") as f:
            json.dump(_Recording.outcomes, f, indent=1, sort_keys=True)
