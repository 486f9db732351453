"""Loads safetensors files written by tapegraph in PyTorch and checks their values.

    python3 tests/data/check_in_torch.py known.safetensors [checkpoint.safetensors digits.csv.gz]

known.safetensors: written by test_safetensors (TG_SAFETENSORS_WRITE_DIR), values by formula.
checkpoint: written by train_digits --save; its model.* entries load into a torch MLP, whose
accuracy on the whole digits set is printed.
"""
import gzip
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file

known = load_file(sys.argv[1])
expect = {
    "a.f32": torch.arange(12, dtype=torch.float32).reshape(3, 4) / 4,
    "b.f64": torch.arange(5, dtype=torch.float64) * -1.5,
    "c.i64": torch.arange(4, dtype=torch.int64) * 1000000000000,
    "d.i32": torch.tensor([7, -8], dtype=torch.int32),
    "e.bool": torch.tensor([False, True, True]),
    "f.transposed": (torch.arange(6, dtype=torch.float32).reshape(2, 3)).t(),
}
assert sorted(known) == sorted(expect), sorted(known)
for k, v in expect.items():
    assert known[k].dtype == v.dtype and known[k].shape == v.shape, (k, known[k].dtype, known[k].shape)
    assert torch.equal(known[k], v), (k, known[k], v)
with safe_open(sys.argv[1], "pt") as f:
    assert f.metadata() == {"format": "pt", "writer": "tapegraph"}, f.metadata()
print(f"{sys.argv[1]}: {len(known)} tensors equal to the expected values, metadata {{'format': 'pt', 'writer': 'tapegraph'}}")

if len(sys.argv) > 2:
    ckpt = load_file(sys.argv[2])
    with safe_open(sys.argv[2], "pt") as f:
        meta = f.metadata()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model.load_state_dict({k[len("model."):]: v for k, v in ckpt.items() if k.startswith("model.")})
    rows = [list(map(int, line.split(","))) for line in gzip.open(sys.argv[3], "rt") if line.strip()]
    data = torch.tensor(rows)
    x, y = data[:, :64].float() / 16, data[:, 64]
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    print(f"{sys.argv[2]}: epoch {meta['epoch']}, {len(ckpt)} tensors; the model in PyTorch: {100 * acc:.2f}% "
          f"on all {len(y)} digits")
