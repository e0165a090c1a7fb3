"""run-gpu-tests' closing table (issue 43): all-reduce and all-gather at five sizes.

Loom's one rank beside NVIDIA NCCL's (nccl-tests -g 1 on each library), and Loom's 2 and 4
ranks sharing GPU 0 as threads (nccl-tests -t on Loom) and as processes (loom-perf -G 1 -N;
resident on the stream, 2 through the host with LOOM_DEVICE_RESIDENT=0, in symmetric windows,
with a 64 MiB scratch, and 2 and 4 under MPS where the run could start it) beside the HBM model: every rank reads its input and writes its output once, 2 x n x S bytes
(S the size column) at the device-to-device copy rate this run measured (cudaMemcpy at
256 MiB, bench_copy.log or bench_kernels.log), or 4.3 TB/s, an H200's, where it did not. Times are medians
over nccl-tests' iterations as each tool prints them, in microseconds, out of place / in place.

    python3 gpu_table.py LOGS
"""
import os
import re
import sys

SIZES = [8, 64 << 10, 1 << 20, 16 << 20, 256 << 20]
SCALE = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def times(path):
    """size -> (out-of-place us, in-place us or None, wrong count) from an nccl-tests-style log."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) < 9 or not f[0].isdigit() or not f[1].isdigit():
            continue
        try:
            oop = float(f[5])
            ip = float(f[9]) if len(f) > 9 and f[9] != "n/a" else None
            wrong = sum(int(x) for x in (f[8], f[12] if len(f) > 12 else "0") if x.isdigit())
        except ValueError:
            continue
        rows[int(f[0])] = (oop, ip, wrong)
    return rows


def copy_rate(logs):
    for name in ("bench_copy.log", "bench_kernels.log"):
        path = os.path.join(logs, name)
        if not os.path.exists(path):
            continue
        for line in open(path, errors="replace"):
            m = re.match(r"CudaMemcpyD2D/268435456\S*_median\b.*bytes_per_second=([0-9.]+)([kMGT]?)/s", line)
            if m:
                return float(m.group(1)) * SCALE[m.group(2)], "measured in this run"
    return 4.3e12, "an H200's, not measured in this run"


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def cell(rows, size):
    if size not in rows:
        return "-"
    oop, ip, wrong = rows[size]
    text = f"{oop:.1f}" + (f" / {ip:.1f}" if ip is not None else "")
    return text + (" WRONG" if wrong else "")


def share(rows, size, model_us):
    if size not in rows:
        return "-"
    oop, _, wrong = rows[size]
    return f"{oop:.1f} ({model_us / oop:.2f})" + (" WRONG" if wrong else "")


def main(logs):
    rate, where = copy_rate(logs)
    print(f"\nClosing table: microseconds, out of place / in place; (share of the HBM model) after "
          f"several ranks' times. Copy rate {rate / 1e12:.2f} TB/s ({where}).\n")
    for coll in ("all_reduce", "all_gather"):
        loom1 = times(os.path.join(logs, f"nccl_tests_{coll}_t1.log"))
        nccl1 = times(os.path.join(logs, f"nvidia_nccl_{coll}_t1.log"))
        threads = {n: times(os.path.join(logs, f"nccl_tests_{coll}_t{n}.log")) for n in (2, 4)}
        procs = {n: times(os.path.join(logs, f"table_{coll}_procs_{n}.log")) for n in (2, 4)}
        host2 = times(os.path.join(logs, f"table_{coll}_procs_2_host.log"))
        windows2 = times(os.path.join(logs, f"table_{coll}_procs_2_windows.log"))
        scratch2 = times(os.path.join(logs, f"table_{coll}_procs_2_scratch64.log"))
        mps = {n: times(os.path.join(logs, f"table_{coll}_procs_{n}_mps.log")) for n in (2, 4)}
        print(f"| {coll} | Loom 1 rank | NCCL 1 rank | Loom / NCCL | 2 threads | 4 threads | 2 processes |"
              f" 4 processes | 2 processes, host path | 2 processes, windows | 2 processes, 64 MiB scratch |"
              f" 2 processes, MPS | 4 processes, MPS | model 2 / 4 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for size in SIZES:
            ratio = "-"
            if size in loom1 and size in nccl1 and nccl1[size][0] > 0:
                ratio = f"{loom1[size][0] / nccl1[size][0]:.2f}"
            model = {n: 2 * n * size / rate * 1e6 for n in (2, 4)}
            print(f"| {human(size)} | {cell(loom1, size)} | {cell(nccl1, size)} | {ratio} | "
                  f"{share(threads[2], size, model[2])} | {share(threads[4], size, model[4])} | "
                  f"{share(procs[2], size, model[2])} | {share(procs[4], size, model[4])} | "
                  f"{share(host2, size, model[2])} | {share(windows2, size, model[2])} | "
                  f"{share(scratch2, size, model[2])} | "
                  f"{share(mps[2], size, model[2])} | {share(mps[4], size, model[4])} | "
                  f"{model[2]:.1f} / {model[4]:.1f} |")
        print()
    # The threads' small all-reduces: one kernel polling the flags (the default) against the
    # flags in memop batches around the kernel (LOOM_DEVICE_ONE_KERNEL_BYTES=0).
    one = times(os.path.join(logs, "nccl_tests_all_reduce_t2.log"))
    batches = times(os.path.join(logs, "nccl_tests_all_reduce_t2_batches.log"))
    if batches:
        print("| all_reduce, 2 threads | one kernel | memop batches |")
        print("|---|---|---|")
        for size in (8, 1 << 10, 64 << 10):
            print(f"| {human(size)} | {cell(one, size)} | {cell(batches, size)} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
