"""run-gpu-tests' closing table (scripts/lib/gpu_table.py) on logs written here: each column
reads its own log, a share is the HBM model's time over the measured one at the run's copy rate,
a wrong count is flagged in every kind of cell, and a column without a log stays empty.

    python3 gpu_table_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

MiB = 1 << 20


def nccl_tests_line(size, oop_us, ip_us, wrong=0):
    """A result line as nccl-tests and loom-perf print it (size count type redop root time algbw busbw
    #wrong, then the same in place)."""
    return (f"{size:>12} {size // 4:>12} float sum -1 {oop_us:9.2f} 1.00 1.00 {wrong} "
            f"{ip_us:9.2f} 1.00 1.00 0\n")


def write(logs, name, rows):
    with open(os.path.join(logs, name), "w") as f:
        f.write("# a header line the table skips\n")
        for size, oop, ip, *wrong in rows:
            f.write(nccl_tests_line(size, oop, ip, *wrong))


def row(table, coll, size_label):
    """The cells of `coll`'s row for `size_label`."""
    in_coll = False
    for line in table.splitlines():
        if line.startswith(f"| {coll} |"):
            in_coll = True
        elif in_coll and line.startswith(f"| {size_label} |"):
            return [c.strip() for c in line.strip().strip("|").split("|")]
    raise AssertionError(f"no row {size_label} under {coll}:\n{table}")


def main(source):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    with tempfile.TemporaryDirectory() as logs:
        # A copy rate of 1 TB/s: the 2-rank model of 256 MiB is 2 x 2 x 256 MiB / 1e12 s = 1073.7 us.
        with open(os.path.join(logs, "bench_copy.log"), "w") as f:
            f.write("CudaMemcpyD2D/268435456/real_time_median  1 ms  1 ms  3 bytes_per_second=1T/s\n")
        write(logs, "nccl_tests_all_reduce_t1.log", [(8, 6.0, 1.0), (256 * MiB, 300.0, 1.0)])
        write(logs, "nvidia_nccl_all_reduce_t1.log", [(8, 5.0, 0.5), (256 * MiB, 250.0, 0.5)])
        write(logs, "table_all_reduce_procs_2_mps.log", [(256 * MiB, 2147.5, 2000.0)])
        write(logs, "table_all_reduce_procs_4_mps.log", [(256 * MiB, 4295.0, 4000.0, 3)])
        out = subprocess.run([sys.executable, os.path.join(source, "scripts", "lib", "gpu_table.py"), logs],
                             capture_output=True, text=True)
        expect("exit status", out.returncode, 0)
        table = out.stdout
        expect("copy rate said", "Copy rate 1.00 TB/s (measured in this run)" in table, True)
        header = next(line for line in table.splitlines() if line.startswith("| all_reduce |"))
        columns = [c.strip() for c in header.strip().strip("|").split("|")]
        big = row(table, "all_reduce", "256 MiB")
        small = row(table, "all_reduce", "8 B")
        expect("cells per row", len(big), len(columns))
        cell = dict(zip(columns, big))
        expect("Loom 1 rank", cell["Loom 1 rank"], "300.0 / 1.0")
        expect("NCCL 1 rank", cell["NCCL 1 rank"], "250.0 / 0.5")
        expect("Loom / NCCL", cell["Loom / NCCL"], "1.20")
        expect("2 processes, MPS", cell["2 processes, MPS"], "2147.5 (0.50)")
        expect("4 processes, MPS, 3 wrong", cell["4 processes, MPS"], "4295.0 (0.50) WRONG")
        expect("model", cell["model 2 / 4"], "1073.7 / 2147.5")
        expect("a column without a log", cell["2 processes, windows"], "-")
        expect("Loom / NCCL at 8 B", dict(zip(columns, small))["Loom / NCCL"], "1.20")
        # A wrong count in a log of one rank's results is flagged in its cell.
        write(logs, "nccl_tests_all_reduce_t1.log", [(8, 6.0, 1.0, 2)])
        table = subprocess.run([sys.executable, os.path.join(source, "scripts", "lib", "gpu_table.py"), logs],
                               capture_output=True, text=True).stdout
        expect("a wrong count", dict(zip(columns, row(table, "all_reduce", "8 B")))["Loom 1 rank"], "6.0 / 1.0 WRONG")

    for f in failures:
        print("FAIL", f)
    print("gpu_table:", "ok" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
