"""The GPT-2 step of bench_gpt2 in PyTorch, for the comparisons in bench/RESULTS.md.

The model is nn::GPT's (GPT-2 small's shape: pre-norm blocks, causal attention through
F.scaled_dot_product_attention, tanh GELU, learned positions, an untied LM head; GPT-2's
initialization), trained by fused AdamW (lr 3e-4, weight decay 0.1) on random tokens, under bf16
autocast or in fp32 with TF32 off. Modes: eager, compile (torch.compile's default mode),
compile_ro (mode="reduce-overhead").

  python3 bench/pt/gpt2.py MODE DTYPE [--layers 12] [--batch 8] [--seq 1024] [--steps 20]
                          [--windows 3] [--warmup 10]
  python3 bench/pt/gpt2.py compile bf16 --profile 5 [--trace trace.json]

Prints one CSV line: pytorch,MODE,DTYPE,LAYERS,BATCH,SEQ,ms_per_step,tokens_per_s,peak_MiB,loss,
windows_ms=W1/W2/...: ms_per_step is the median of the timed windows, each --steps steps long.
With --profile N it profiles N steps after the timed ones with torch.profiler and prints its table
and the device time per stage, by kernel names, in the stages of tapegraph's profiler/stages.cpp.
"""
import argparse
import statistics
import math
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        for lin in (self.qkv, self.out, self.fc, self.proj):
            nn.init.normal_(lin.weight, std=0.02)
            nn.init.zeros_(lin.bias)
        for lin in (self.out, self.proj):  # residual projections, as GPT-2 scales them
            nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50304, context=1024, d=768, heads=12, layers=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.h = nn.ModuleList(Block(d, heads, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        for w in (self.wte.weight, self.wpe.weight, self.lm_head.weight):
            nn.init.normal_(w, std=0.02)

    def forward(self, idx):
        h = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            h = block(h)
        return self.lm_head(self.ln_f(h))


# Stage rules on kernel names, in order (the first that matches wins), the same stages as
# tapegraph's profiler/stages.cpp. Triton kernels name the ops they fused ("triton_per_fused__to_copy_
# add_native_layer_norm_0" is a norm with its cast); a kernel that only casts is a cast.
KERNEL_RULES = [
    ("attention", r"sdpa|flash|fmha|attention|efficient_attention"),
    ("loss", r"cross_entropy|nll_loss|log_softmax|SoftMax"),
    ("matmul", r"gemm|nvjet|xmma|cutlass|cublas|matmul"),
    ("norms", r"layer_norm|group_norm|batch_norm|rms_norm"),
    ("optimizer", r"adam|Adam|sgd|multi_tensor_apply"),
    ("casts", r"fused__to_copy_\d+$|ConvertFn|copy_kernel"),
    ("elementwise", r"elementwise|vectorized|triton_|fused"),
    ("copies and fills", r"^Memcpy|^Memset|memcpy|memset|fill"),
]
STAGES = ["attention", "matmul", "norms", "elementwise", "casts", "loss", "optimizer", "copies and fills", "other"]


def stage_of(kernel):
    for stage, rule in KERNEL_RULES:
        if re.search(rule, kernel):
            return stage
    return "other"


def stage_breakdown(prof, steps):
    """Prints the device time per stage, ms per step, of a torch.profiler run."""
    totals, counts = {s: 0.0 for s in STAGES}, {s: 0 for s in STAGES}
    for e in prof.events():
        # Device work only: ranges the profiler draws on the GPU's timeline ("Optimizer.step#AdamW.step")
        # span kernels that are counted themselves.
        if e.device_type != torch.autograd.DeviceType.CUDA or getattr(e, "is_user_annotation", False):
            continue
        if e.name.startswith("Optimizer.") or e.name.startswith("## "):
            continue
        s = stage_of(e.name)
        totals[s] += e.time_range.elapsed_us() / 1000.0
        counts[s] += 1
    total = sum(totals.values())
    print(f"{'stage':<18} {'ms per step':>14} {'share':>8} {'kernels/step':>12}")
    for s in STAGES:
        print(f"{s:<18} {totals[s] / steps:>14.3f} {100 * totals[s] / max(total, 1e-9):>7.1f}% "
              f"{counts[s] / steps:>12.1f}")
    print(f"{'total':<18} {total / steps:>14.3f} {100.0:>7.1f}%")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["eager", "compile", "compile_ro"])
    p.add_argument("dtype", choices=["bf16", "fp32"])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--windows", type=int, default=3, help="timed windows of --steps steps; the median is reported")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--profile", type=int, default=0)
    p.add_argument("--trace", default="")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = "cuda"
    model = GPT(context=a.seq, layers=a.layers).to(dev)
    tokens = torch.randint(0, 50304, (a.batch, a.seq + 1), device=dev)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)

    def loss_of(inp, tgt):
        return F.cross_entropy(model(inp).flatten(0, 1), tgt.flatten())

    f = {"eager": loss_of, "compile": torch.compile(loss_of),
         "compile_ro": torch.compile(loss_of, mode="reduce-overhead")}[a.mode]

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = f(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    torch.cuda.reset_peak_memory_stats()
    for _ in range(a.warmup):
        loss = step()
    # Several timed windows, the median reported: the first steps after compiling can run slower
    # (a torch.compile step measured 20.0 to 22.0 ms in a first window and 19.0 in a second).
    windows = []
    for _ in range(max(1, a.windows)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        torch.cuda.synchronize()
        windows.append((time.perf_counter() - t0) * 1000 / a.steps)
    ms = statistics.median(windows)
    peak = torch.cuda.max_memory_allocated() / 2**20
    print(f"pytorch,{a.mode},{a.dtype},{a.layers},{a.batch},{a.seq},{ms:.2f},{a.batch * a.seq / (ms / 1000):.0f},"
          f"{peak:.0f},{loss.item():.4f},windows_ms={'/'.join(f'{w:.2f}' for w in windows)}", flush=True)
    if a.profile > 0:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(a.profile):
                step()
            torch.cuda.synchronize()
        if a.trace:
            prof.export_chrome_trace(a.trace)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))
        print("device time by stage:")
        stage_breakdown(prof, a.profile)


if __name__ == "__main__":
    main()
