#!/usr/bin/python3
"""PyTorch worker for bench/calibration (bench_worker.h's protocol on stdin/stdout):

    torch_calib.py NAME DATA_DIR BATCH_NUM THREADS --mode calib|forward

NAME is a bench/zoo/export.py model (the same seeded weights as the ONNX file calq calibrates);
DATA_DIR/<k>.npy are the batches calq reads. One timed action is:
  calib:   PyTorch's post-training static quantization with its default x86 config
           (get_default_qconfig_mapping("fbgemm"): HistogramObserver on every quantized layer's
           activations, per-channel MinMax on the weights), FX graph mode: prepare_fx (which
           also folds BatchNorm), the BATCH_NUM batches through the observed model, convert_fx
           (computes the scales and zero points, quantizes the weights);
  forward: the BATCH_NUM batches through the float model.
The model copy that prepare_fx consumes is made outside the timing."""
import copy
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo"))
import export  # noqa: E402

warnings.filterwarnings("ignore")


def main():
    name, data_dir, batch_num, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    mode = sys.argv[sys.argv.index("--mode") + 1]
    torch.set_num_threads(threads)
    model, _ = export.build(name)
    batches = [torch.from_numpy(np.load(os.path.join(data_dir, f"{k:04d}.npy"))) for k in range(batch_num)]
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    qmap = get_default_qconfig_mapping("fbgemm")

    def calib(m):
        t = time.perf_counter()
        with torch.no_grad():
            p = prepare_fx(m, qmap, example_inputs=(batches[0],))
            for b in batches:
                p(b)
            convert_fx(p)
        return (time.perf_counter() - t) * 1e3

    def forward(_):
        t = time.perf_counter()
        with torch.no_grad():
            for b in batches:
                model(b)
        return (time.perf_counter() - t) * 1e3

    action = calib if mode == "calib" else forward
    action(copy.deepcopy(model))  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        if line.startswith("quit"):
            break
        k = int(line.split()[1])
        times, cpu = [], []
        for _ in range(k):
            arg = copy.deepcopy(model) if mode == "calib" else None
            c0 = time.process_time()
            times.append(action(arg))
            cpu.append((time.process_time() - c0) * 1e3)
        print("times " + " ".join(f"{t:.4f}" for t in times) + " cpu " + " ".join(f"{t:.4f}" for t in cpu),
              flush=True)


if __name__ == "__main__":
    main()
