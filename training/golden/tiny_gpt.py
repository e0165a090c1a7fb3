#!/usr/bin/python3
"""The tiny GPT of training/models/gpt.hpp in PyTorch, for the golden test.

Reads what the C++ test wrote (shape, AdamW settings, the flat initial
parameters in Loom's order, one batch of tokens and targets), and writes what
torch computes from them: the logits, the loss, every parameter's gradient,
and the loss at each of `steps` AdamW steps on that batch. Exit 77 when torch
is not installed (the test then skips).

usage: tiny_gpt.py IN OUT   (little-endian binary; the layout is in read/write below)
"""
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    vocab, context, dim, heads, layers, batch, steps = struct.unpack_from("<7q", data, 0)
    lr, beta1, beta2, eps, wd = struct.unpack_from("<5d", data, 56)
    offset = 96
    (count,) = struct.unpack_from("<q", data, offset)
    offset += 8
    params = torch.frombuffer(bytearray(data[offset:offset + 4 * count]), dtype=torch.float32).clone()
    offset += 4 * count
    tokens = torch.frombuffer(bytearray(data[offset:offset + 4 * batch * context]), dtype=torch.int32).long()
    offset += 4 * batch * context
    targets = torch.frombuffer(bytearray(data[offset:offset + 4 * batch * context]), dtype=torch.int32).long()
    shape = dict(vocab=vocab, context=context, dim=dim, heads=heads, layers=layers, batch=batch, steps=steps)
    return shape, (lr, beta1, beta2, eps, wd), params, tokens.view(batch, context), targets.view(batch, context)


def views(flat, s):
    """The named parameters as views of the flat tensor, in Loom's order."""
    V, T, C, L = s["vocab"], s["context"], s["dim"], s["layers"]
    sizes = [("wte", (V, C)), ("wpe", (T, C))]
    for l in range(L):
        sizes += [(f"{l}.ln1.w", (C,)), (f"{l}.ln1.b", (C,)), (f"{l}.qkv.w", (3 * C, C)), (f"{l}.qkv.b", (3 * C,)),
                  (f"{l}.proj.w", (C, C)), (f"{l}.proj.b", (C,)), (f"{l}.ln2.w", (C,)), (f"{l}.ln2.b", (C,)),
                  (f"{l}.fc.w", (4 * C, C)), (f"{l}.fc.b", (4 * C,)), (f"{l}.fcproj.w", (C, 4 * C)),
                  (f"{l}.fcproj.b", (C,))]
    sizes += [("lnf.w", (C,)), ("lnf.b", (C,)), ("head.w", (V, C))]
    out, at = {}, 0
    for name, shape in sizes:
        n = 1
        for d in shape:
            n *= d
        out[name] = flat[at:at + n].view(shape)
        at += n
    assert at == flat.numel(), (at, flat.numel())
    return out


def forward(p, tokens, s):
    B, T = tokens.shape
    C, H = s["dim"], s["heads"]
    x = p["wte"][tokens] + p["wpe"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(s["layers"]):
        h = F.layer_norm(x, (C,), p[f"{l}.ln1.w"], p[f"{l}.ln1.b"], eps=1e-5)
        q, k, v = F.linear(h, p[f"{l}.qkv.w"], p[f"{l}.qkv.b"]).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (C // H) ** 0.5
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, p[f"{l}.proj.w"], p[f"{l}.proj.b"])
        h = F.layer_norm(x, (C,), p[f"{l}.ln2.w"], p[f"{l}.ln2.b"], eps=1e-5)
        h = F.gelu(F.linear(h, p[f"{l}.fc.w"], p[f"{l}.fc.b"]), approximate="tanh")
        x = x + F.linear(h, p[f"{l}.fcproj.w"], p[f"{l}.fcproj.b"])
    x = F.layer_norm(x, (C,), p["lnf.w"], p["lnf.b"], eps=1e-5)
    return F.linear(x, p["head.w"])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    s, (lr, beta1, beta2, eps, wd), init, tokens, targets = read(sys.argv[1])
    flat = init.clone().requires_grad_(True)
    logits = forward(views(flat, s), tokens, s)
    loss = F.cross_entropy(logits.view(-1, s["vocab"]), targets.view(-1))
    loss.backward()
    first_logits, first_loss, grads = logits.detach().flatten(), loss.item(), flat.grad.detach().clone()

    flat = init.clone().requires_grad_(True)
    opt = torch.optim.AdamW([flat], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=wd, foreach=False)
    losses = []
    for _ in range(s["steps"]):
        opt.zero_grad()
        loss = F.cross_entropy(forward(views(flat, s), tokens, s).view(-1, s["vocab"]), targets.view(-1))
        loss.backward()
        losses.append(loss.item())
        opt.step()
    def floats(t):
        values = t.flatten().tolist()
        return struct.pack(f"<{len(values)}f", *values)

    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<q", first_logits.numel()) + floats(first_logits))
        f.write(struct.pack("<d", first_loss))
        f.write(struct.pack("<q", grads.numel()) + floats(grads))
        f.write(struct.pack("<q", len(losses)) + struct.pack(f"<{len(losses)}d", *losses))


if __name__ == "__main__":
    main()
