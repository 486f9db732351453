# PyTorch twin of bench/bench_transformer.cpp: transformer_lm, a small causal transformer language
# model's training step: vocab 256, d_model 128, 4 heads, 2 pre-norm blocks (causal self-attention,
# MLP 128-512-128 with GELU), learned positions, LM head; batch 8 of 64 tokens, cross-entropy on the
# next token, SGD lr 1e-3. fp32, TF32 off. Needs pt_mlp_step.py (timeit, kernel_sum_us) on the path.
# Modes: eager, compile_reduce_overhead (forward compiled), manual_cudagraph (whole step captured).
# Prints: workload,mode,us_per_step,kernel_us_per_step,kernels_per_step,compile_s
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
from pt_mlp_step import timeit, kernel_sum_us

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
V, D, HEADS, LAYERS, T, B = 256, 128, 4, 2, 64, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.ln_2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 4 * D)
        self.proj = nn.Linear(4 * D, D)

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, is_causal=True, need_weights=False)[0]
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class TransformerLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T, D)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
        self.register_buffer("positions", torch.arange(T))
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T))

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(self.positions)
        for b in self.h:
            x = b(x, self.mask)
        return self.head(self.ln_f(x))


def run(mode):
    torch.manual_seed(0)
    m = TransformerLM().to(dev)
    tokens = torch.randint(0, V, (B, T + 1), device=dev)
    x, y = tokens[:, :T].contiguous(), tokens[:, 1:].contiguous()
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)

    def fwd(x, y):
        return F.cross_entropy(m(x).reshape(B * T, V), y.reshape(B * T))

    def step(f=fwd):
        opt.zero_grad(set_to_none=True)
        loss = f(x, y); loss.backward(); opt.step()
        return loss

    comp_s = 0.0
    torch._dynamo.reset()
    if mode == "eager":
        fn = step
    elif mode == "compile_reduce_overhead":
        cf = torch.compile(fwd, mode="reduce-overhead")
        t0 = time.perf_counter()
        for _ in range(3): step(cf)
        torch.cuda.synchronize(); comp_s = time.perf_counter() - t0
        fn = lambda: step(cf)
    elif mode == "manual_cudagraph":
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                opt.zero_grad(set_to_none=False)
                loss = fwd(x, y); loss.backward(); opt.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        with torch.cuda.graph(g):
            loss = fwd(x, y); loss.backward(); opt.step()
        torch.cuda.synchronize(); comp_s = time.perf_counter() - t0
        fn = g.replay
    else:
        raise SystemExit(mode)
    us = timeit(fn, 100)
    ks, nk = kernel_sum_us(fn)
    print(f"transformer_lm,{mode},{us:.1f},{ks:.1f},{nk:.1f},{comp_s:.3f}", flush=True)


if __name__ == "__main__":
    print("workload,mode,us_per_step,kernel_us_per_step,kernels_per_step,compile_s", flush=True)
    modes = [a[5:] for a in sys.argv[1:] if a.startswith("mode=")] or ["eager", "compile_reduce_overhead", "manual_cudagraph"]
    for mode in modes:
        try:
            run(mode)
        except Exception as e:
            print(f"transformer_lm,{mode},ERROR {type(e).__name__}: {str(e)[:300]}", flush=True)
