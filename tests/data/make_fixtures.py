"""Writes the safetensors fixtures of test_safetensors with PyTorch's safetensors.torch.save_file.

    python3 tests/data/make_fixtures.py OUT_DIR
"""
import sys

import torch
from safetensors.torch import save_file

out = sys.argv[1]

# Every dtype tapegraph reads, values given by formulas the test checks.
save_file(
    {
        "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5,
        "f64": torch.arange(4, dtype=torch.float64) / 3,
        "i64": torch.arange(5, dtype=torch.int64) - 2,
        "i32": torch.tensor([[1, -2], [3, 4]], dtype=torch.int32),
        "flags": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 3),
    },
    f"{out}/dtypes.safetensors",
    metadata={"format": "pt", "note": "fixture"},
)

# A PyTorch MLP's state_dict and its output on a fixed input.
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
save_file(mlp.state_dict(), f"{out}/mlp.safetensors", metadata={"format": "pt"})
x = torch.linspace(-1, 1, 20).reshape(5, 4)
with torch.no_grad():
    save_file({"x": x, "y": mlp(x)}, f"{out}/mlp_io.safetensors")
