#!/usr/bin/python3
"""PyTorch 1.13 DDP (gloo) training the same tiny GPT as loom-train, for bench/training/compare.

The model is training/models/gpt.hpp's (and training/golden/tiny_gpt.py's) as
torch modules; the data the same windows of The Devil's Dictionary (Debian's
dict-devil), the bytes it holds numbered in byte order, samples drawn by the
same seeded plan's shapes (a random window per sample: the speed does not
depend on which). Each rank runs batch / ranks samples per step with one
thread (OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1)), AdamW, and prints
one line per step; the last line is the median step time and tokens/s.

usage: torch_ddp_gpt.py --ranks N --steps S --batch B --layers L --dim D --heads H --seq T [--warmup W]
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.fcproj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (C // self.heads) ** 0.5
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, dim, heads, layers):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.lnf, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        return self.head(self.lnf(self.blocks(x)))


def text():
    with gzip.open("/usr/share/dictd/devil.dict.dz") as f:
        data = f.read()
    vocab = sorted(set(data))
    index = {b: i for i, b in enumerate(vocab)}
    return torch.tensor([index[b] for b in data], dtype=torch.long), len(vocab)


def run(rank, args, port):
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.ranks)
    ids, vocab = text()
    torch.manual_seed(args.seed)
    model = Gpt(vocab, args.seq, args.dim, args.heads, args.layers)
    ddp = nn.parallel.DistributedDataParallel(model) if args.ranks > 1 else model
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr, foreach=False)
    per_rank = args.batch // args.ranks
    gen = torch.Generator().manual_seed(args.seed + rank)
    times = []
    for step in range(args.steps):
        starts = torch.randint(0, len(ids) - args.seq - 1, (per_rank,), generator=gen)
        x = torch.stack([ids[s:s + args.seq] for s in starts])
        y = torch.stack([ids[s + 1:s + args.seq + 1] for s in starts])
        begin = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x).view(-1, vocab), y.view(-1))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - begin)
        if rank == 0:
            print(f"step {step + 1} loss {loss.item():.4f} {times[-1] * 1e3:.2f} ms", flush=True)
    if rank == 0:
        median = statistics.median(times[args.warmup:])
        print(f"median step {median * 1e3:.3f} ms, {args.batch * args.seq / median:.0f} tokens/s", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    for name, default in [("ranks", 2), ("steps", 30), ("batch", 16), ("layers", 4), ("dim", 128), ("heads", 4),
                          ("seq", 64), ("warmup", 5), ("seed", 1)]:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()
    if args.batch % args.ranks != 0:
        sys.exit("--batch must split over --ranks")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(args, port), nprocs=args.ranks)


if __name__ == "__main__":
    main()
