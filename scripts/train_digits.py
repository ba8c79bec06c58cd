#!/usr/bin/python3
# Python: Debian's /usr/bin/python3, because it is the one with torch 1.13 (+ onnx, sklearn).
"""Train a tiny CNN on scikit-learn's 8x8 digits and export it for Kite's demo.

Writes (into --out, default models/digits/):
  digits_cnn.onnx        opset 13, input 'image' [N,1,8,8] float32, output 'logits' [N,10];
                         N is fixed to the held-out set size. Exported without
                         constant folding and without the exporter's Conv+BN fusion,
                         so the BatchNormalization nodes stay in the graph and the
                         converter has real folding work to do.
  heldout_images.npy     float32 [N,1,8,8], already normalised as the model expects
  heldout_labels.npy     int64 [N]
  reference.json         {"framework": "PyTorch <version>", "heldout_accuracy": ..., "n": ...}

Everything is seeded, single-threaded and deterministic: rerunning the script
gives the same weights and the same files. Training takes a few seconds on CPU.

Usage:  scripts/train_digits.py [--out models/digits] [--epochs 30] [--seed 0]
"""
import argparse
import json
import os
import random
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The ops the first Kite CPU backend implements; the exported graph must stay inside.
ALLOWED_OPS = {
    "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "BatchNormalization",
    "Relu", "Sigmoid", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool",
    "Flatten", "Reshape", "Concat", "Softmax", "Transpose", "Identity",
}


class DigitsCNN(nn.Module):
    """Conv(1->8)+BN+ReLU+MaxPool2 -> Conv(8->16)+BN+ReLU -> Flatten -> Gemm(256->10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))   # 8x4x4
        x = torch.relu(self.bn2(self.conv2(x)))                # 16x4x4
        x = torch.flatten(x, 1)                                # 256 (ONNX Flatten axis=1)
        return self.fc(x)                                      # ONNX Gemm


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models", "digits"))
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-size", type=float, default=0.25)
    args = ap.parse_args()
    seed_everything(args.seed)

    digits = load_digits()
    x = digits.images.astype(np.float32) / 16.0          # [1797, 8, 8] in [0, 1]
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=args.test_size, stratify=y, random_state=args.seed)
    # Normalise with the training split's statistics (one scalar mean/std).
    mean, std = float(x_tr.mean()), float(x_tr.std())
    x_tr = ((x_tr - mean) / std)[:, None, :, :].astype(np.float32)
    x_te = ((x_te - mean) / std)[:, None, :, :].astype(np.float32)
    n = int(x_te.shape[0])

    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    gen = torch.Generator().manual_seed(args.seed)
    batch = 64
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(xt.shape[0], generator=gen)
        total = 0.0
        for i in range(0, xt.shape[0], batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += float(loss) * idx.numel()
        if epoch % 10 == 9 or epoch == args.epochs - 1:
            print(f"epoch {epoch + 1:3d}  train loss {total / xt.shape[0]:.4f}")

    model.eval()
    xe = torch.from_numpy(x_te)
    with torch.no_grad():
        logits = model(xe).numpy()
    acc = float((logits.argmax(1) == y_te).mean())
    print(f"held-out accuracy (PyTorch): {acc:.4f} on {n} images")

    os.makedirs(args.out, exist_ok=True)
    onnx_path = os.path.join(args.out, "digits_cnn.onnx")
    # training=PRESERVE with the model in eval mode: exported in inference mode, but
    # torch skips its "eval peephole" pass, which would fold BatchNorm into Conv.
    # do_constant_folding=False keeps the graph as written.
    torch.onnx.export(
        model, xe, onnx_path,
        input_names=["image"], output_names=["logits"],
        opset_version=13, do_constant_folding=False,
        training=torch.onnx.TrainingMode.PRESERVE)

    m = onnx.load(onnx_path)
    onnx.checker.check_model(m)
    ops = [nd.op_type for nd in m.graph.node]
    bad = sorted(set(ops) - ALLOWED_OPS)
    if bad:
        sys.exit(f"error: exported graph uses ops outside the allowed set: {bad}")
    if ops.count("BatchNormalization") != 2:
        sys.exit(f"error: expected 2 BatchNormalization nodes in the export, got ops {ops}")
    print("exported ops:", ", ".join(ops))

    np.save(os.path.join(args.out, "heldout_images.npy"), x_te)
    np.save(os.path.join(args.out, "heldout_labels.npy"), y_te.astype(np.int64))
    ref = {
        "framework": f"PyTorch {torch.__version__}",
        "heldout_accuracy": round(acc, 6),
        "n": n,
        "seed": args.seed,
        "normalisation": {"scale": 1.0 / 16.0, "mean": round(mean, 8), "std": round(std, 8)},
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=2)
        f.write("\n")
    total_bytes = sum(os.path.getsize(os.path.join(args.out, p)) for p in os.listdir(args.out))
    print(f"wrote {args.out} ({total_bytes} bytes)")


if __name__ == "__main__":
    main()
