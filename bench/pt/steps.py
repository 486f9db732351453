"""The small training steps of tapegraph's benchmarks in PyTorch, for the ratios in bench/RESULTS.md.

Each workload is the model, batch, loss and optimizer that bench/ builds (bench/support/workloads.h,
bench/support/resnet_tiny.h, bench/bench_lstm.cpp), fp32 with TF32 off unless its name says otherwise:

  mlp_small      batch 64, Linear 128-256-256-10 with ReLU between, cross-entropy, SGD lr 1e-3
  mlp_wide       batch 256, Linear 1024-4096-4096-1024, the same loss and optimizer
  mlp_wide_bf16  mlp_wide under bfloat16 autocast
  resnet_tiny    batch 128 of 3x32x32: conv3x3(3->32)+BN+ReLU, basic blocks 32, 32, 32->64 (stride 2,
                 1x1 conv+BN shortcut), 64; global average pool; Linear(64, 10); cross-entropy;
                 SGD lr 0.01 momentum 0.9
  lstm_seed      LSTM(64, 64, num_layers=2, bidirectional=True) over (92, 4, 64), MSE against a fixed
                 (92, 4, 128) target, SGD lr 1e-3
  transformer_lm bench/bench_transformer.cpp's model: vocab 256, d_model 128, 4 heads, 2 pre-norm
                 blocks (causal self-attention through nn.MultiheadAttention, MLP 128-512-128 with
                 GELU), learned positions, LM head; batch 8 of 64 tokens, next-token cross-entropy,
                 SGD lr 1e-3

Modes: eager; compile (torch.compile(mode="reduce-overhead") of the loss, the backward and the
update eager, as the anchors time it); graph (the whole step, forward, backward and update,
captured once by hand into a torch.cuda.CUDAGraph and replayed).

  python3 bench/pt/steps.py [WORKLOAD ...] [--modes eager,compile,graph] [--device cuda] [--iters N]

Prints one CSV line per (workload, mode): pytorch,WORKLOAD,MODE,us_per_step (the median of five
timed runs of N steps each, after warm-up), or the error a mode raised.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); the shortcut a 1x1 conv + BN when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


def resnet_tiny():
    return nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                         BasicBlock(32, 32, 1), BasicBlock(32, 32, 1), BasicBlock(32, 64, 2), BasicBlock(64, 64, 1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


class LstmSeed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(64, 64, num_layers=2, bidirectional=True)

    def forward(self, x):
        return self.lstm(x)[0]


class LmBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, is_causal=True, need_weights=False)[0]
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class TransformerLm(nn.Module):
    """Token ids [B, T] to next-token logits [B * T, V]."""

    def __init__(self, vocab=256, d=128, heads=4, layers=2, context=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList([LmBlock(d, heads) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        self.register_buffer("positions", torch.arange(context))
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), 1))

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(self.positions[: tokens.shape[1]])
        for block in self.blocks:
            x = block(x, self.mask)
        logits = self.head(self.ln_f(x))
        return logits.reshape(-1, logits.shape[-1])


def workload(name, device):
    """(model, x, y, loss function, SGD options, autocast dtype or None) of a workload, from seed 0."""
    torch.manual_seed(0)
    if name in ("mlp_small", "mlp_wide", "mlp_wide_bf16"):
        batch, widths = (64, [128, 256, 256, 10]) if name == "mlp_small" else (256, [1024, 4096, 4096, 1024])
        x = torch.randn(batch, widths[0], device=device)
        y = torch.randint(0, widths[-1], (batch,), device=device)
        amp = torch.bfloat16 if name.endswith("_bf16") else None
        return mlp(widths).to(device), x, y, F.cross_entropy, dict(lr=1e-3), amp
    if name == "resnet_tiny":
        x = torch.randn(128, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (128,), device=device)
        return resnet_tiny().to(device), x, y, F.cross_entropy, dict(lr=0.01, momentum=0.9), None
    if name == "lstm_seed":
        x = torch.randn(92, 4, 64, device=device)
        y = torch.randn(92, 4, 128, device=device)
        return LstmSeed().to(device), x, y, F.mse_loss, dict(lr=1e-3), None
    if name == "transformer_lm":
        tokens = torch.randint(0, 256, (8, 65), device=device)
        x, y = tokens[:, :64].contiguous(), tokens[:, 1:].reshape(-1).contiguous()
        return TransformerLm().to(device), x, y, F.cross_entropy, dict(lr=1e-3), None
    raise SystemExit(f"unknown workload {name!r}")


def median_us(step, iters, device, warm=20):
    """Median over five runs of `iters` steps of the time per step in microseconds."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warm):
        step()
    sync()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        runs.append((time.perf_counter() - start) / iters * 1e6)
    return statistics.median(runs)


def make_step(name, mode, device):
    model, x, y, loss_fn, sgd, amp = workload(name, device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), **sgd)

    def loss_of(a, b):
        with torch.autocast(device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            return loss_fn(model(a), b)

    if mode == "eager":
        def step():
            opt.zero_grad(set_to_none=True)
            loss_of(x, y).backward()
            opt.step()
        return step
    if mode == "compile":
        compiled = torch.compile(loss_of, mode="reduce-overhead")

        def step():
            opt.zero_grad(set_to_none=True)
            compiled(x, y).backward()
            opt.step()
        return step
    if mode == "graph":
        if device.type != "cuda":
            raise SystemExit("mode graph needs CUDA")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
            for _ in range(3):
                opt.zero_grad(set_to_none=False)
                loss_of(x, y).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        with torch.cuda.graph(graph):
            loss_of(x, y).backward()
            opt.step()
        return graph.replay
    raise SystemExit(f"unknown mode {mode!r}")


def main():
    names = ["mlp_small", "mlp_wide", "mlp_wide_bf16", "resnet_tiny", "lstm_seed", "transformer_lm"]
    p = argparse.ArgumentParser()
    p.add_argument("workloads", nargs="*", default=names)
    p.add_argument("--modes", default="eager,compile,graph")
    p.add_argument("--device", default="cuda")
    p.add_argument("--iters", type=int, default=0, help="steps per timed run (0: by workload)")
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    for name in args.workloads:
        iters = args.iters or {"mlp_small": 200, "lstm_seed": 30, "transformer_lm": 100}.get(name, 50)
        for mode in args.modes.split(","):
            try:
                us = median_us(make_step(name, mode, device), iters, device)
                print(f"pytorch,{name},{mode},{us:.1f}", flush=True)
            except Exception as e:  # noqa: BLE001 - reported, and the other modes still run
                print(f"pytorch,{name},{mode},ERROR {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


if __name__ == "__main__":
    main()
