#!/usr/bin/env python3
"""bench/compare's bookkeeping, which decides what its tables claim: which
rounds ran close or far, speed-ups taken between the runs of one round (not
between medians taken apart), and the turning order of the contenders.

    bench_compare_test.py SOURCE_DIR
"""

import importlib.machinery
import importlib.util
import os
import sys
import unittest


def load_compare(source_dir):
    sys.dont_write_bytecode = True  # nothing written into the source tree
    path = os.path.join(source_dir, "bench", "compare")
    loader = importlib.machinery.SourceFileLoader("bench_compare", path)
    spec = importlib.util.spec_from_loader("bench_compare", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


compare = None


class Placement(unittest.TestCase):
    def test_both_probes_close_or_far(self):
        self.assertEqual(compare.placement(0.03, 0.04), "close")
        self.assertEqual(compare.placement(0.15, 0.12), "far")

    def test_a_move_between_the_probes_is_mixed(self):
        self.assertEqual(compare.placement(0.03, 0.16), "mixed")
        self.assertEqual(compare.placement(0.16, 0.03), "mixed")

    def test_the_boundary_is_far(self):
        self.assertEqual(compare.placement(compare.CLOSE_BELOW_US, compare.CLOSE_BELOW_US), "far")

    def test_no_probe_no_placement(self):
        self.assertIsNone(compare.placement(None, 0.03))
        self.assertIsNone(compare.placement(0.03, None))


class PairedRatios(unittest.TestCase):
    def test_ratios_pair_the_runs_of_one_round(self):
        # Round 2 ran in a slow minute for both. Ratios of medians would set
        # round 1's Loom (2.0) against round 3's peer (4.0); paired, every
        # round says the peer took twice Loom's time.
        loom = [{8: (2.0, 0)}, {8: (10.0, 0)}, {8: (1.0, 0)}]
        peer = [{8: (4.0, 0)}, {8: (20.0, 0)}, {8: (2.0, 0)}]
        self.assertEqual(compare.paired_ratios(peer, loom, 8), [2.0, 2.0, 2.0])
        self.assertEqual(compare.spread(compare.paired_ratios(peer, loom, 8)), (2.0, 2.0, 2.0))

    def test_a_round_missing_either_side_is_skipped(self):
        loom = [{8: (1.0, 0)}, {}, {8: (1.0, 0)}, {8: (0.0, 0)}]
        peer = [{8: (3.0, 0)}, {8: (5.0, 0)}, {}, {8: (1.0, 0)}]
        self.assertEqual(compare.paired_ratios(peer, loom, 8), [3.0])
        self.assertEqual(compare.paired_ratios(peer, loom, 16), [])

    def test_spread_is_median_lowest_highest(self):
        self.assertEqual(compare.spread([1.5, 0.5, 3.0]), (1.5, 0.5, 3.0))
        self.assertEqual(compare.spread([]), (None, None, None))


class Sweeps(unittest.TestCase):
    def test_small_sizes_get_their_own_iterations(self):
        self.assertEqual(compare.sweeps("8", "64M", "8", "10", "3", 2000),
                         [["-b", "8", "-e", "32768", "-f", "8", "-n", "2000", "-w", "200"],
                          ["-b", "262144", "-e", "16777216", "-f", "8", "-n", "10", "-w", "3"]])

    def test_the_split_is_at_64_kib(self):
        self.assertEqual(compare.sweeps("16K", "256K", "2", "10", "3", 1000),
                         [["-b", "16384", "-e", "32768", "-f", "2", "-n", "1000", "-w", "100"],
                          ["-b", "65536", "-e", "262144", "-f", "2", "-n", "10", "-w", "3"]])

    def test_one_sweep_where_no_size_is_small_or_every_one_is(self):
        self.assertEqual(compare.sweeps("1M", "4M", "2", "10", "3", 2000),
                         [["-b", "1048576", "-e", "4194304", "-f", "2", "-n", "10", "-w", "3"]])
        self.assertEqual(compare.sweeps("8", "1K", "2", "10", "3", 50),
                         [["-b", "8", "-e", "1024", "-f", "2", "-n", "50", "-w", "5"]])

    def test_small_n_0_keeps_n(self):
        self.assertEqual(compare.sweeps("8", "1M", "8", "10", "3", 0),
                         [["-b", "8", "-e", "262144", "-f", "8", "-n", "10", "-w", "3"]])

    def test_sizes(self):
        self.assertEqual([compare.size_of(t) for t in ("8", "64K", "16m", "1G")], [8, 65536, 16 << 20, 1 << 30])


class Turns(unittest.TestCase):
    def test_each_round_starts_with_the_next_contender(self):
        order = ["loom", "base", "mpi"]
        self.assertEqual(compare.turned(order, 0), ["loom", "base", "mpi"])
        self.assertEqual(compare.turned(order, 1), ["base", "mpi", "loom"])
        self.assertEqual(compare.turned(order, 2), ["mpi", "loom", "base"])
        self.assertEqual(compare.turned(order, 3), order)

    def test_no_contenders(self):
        self.assertEqual(compare.turned([], 5), [])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    compare = load_compare(sys.argv.pop(1))
    unittest.main()
