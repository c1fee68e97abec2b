#!/usr/bin/python3
"""calq vs onnxruntime-node on one-node (and small) models built here with onnx.helper.

Covers the operators the ONNX node tests do not pin down enough (recurrent layers with every
attribute, Einsum patterns of real models, detection ops on random boxes) and, with
`--opsets`, the operator signatures of opsets 18 to 21 (the node test data stops at 17).
Every case runs in calq twice (reference kernels, then the default fast kernels) and once in
onnxruntime; every output must match within the case's tolerance.

usage: ops_vs_ort.py CALQ ORT_RUN_JS [--only SUBSTR] [--keep DIR]
Exit 0: all match; 1: a mismatch or a run failed; 77: onnxruntime-node is not installed.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto as TP
from onnx import helper as h

F = TP.FLOAT
I64 = TP.INT64
rng = np.random.default_rng(1234)


def rnd(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def one_node(op, inputs, outputs, opset=17, domain_opsets=None, **attrs):
    """inputs: list of (name, array) fed at run time; outputs: list of names. Returns (model, feeds)."""
    node = h.make_node(op, [n for n, _ in inputs], [o.split(":")[0] for o in outputs], **attrs)
    return graph_model([node], inputs, outputs, opset)


def graph_model(nodes, inputs, outputs, opset=17, inits=()):
    ins = []
    for n, a in inputs:
        if n == "":
            continue
        t = {np.float32: F, np.int64: I64, np.int32: TP.INT32, np.int8: TP.INT8, np.uint8: TP.UINT8,
             np.bool_: TP.BOOL}[a.dtype.type]
        ins.append(vi(n, t, list(a.shape)))
    # "name" is a float output, "name:i64" (:i32, :i8, :bool) an integer one (shapes are left to the runtimes)
    kinds = {"i64": I64, "i32": TP.INT32, "i8": TP.INT8, "u8": TP.UINT8, "bool": TP.BOOL}
    outs = [vi(o.split(":")[0], kinds[o.split(":")[1]] if ":" in o else F, None) for o in outputs]
    g = h.make_graph(nodes, "g", ins, outs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8 if opset <= 18 else 9 if opset <= 20 else 10
    return m, {n: a for n, a in inputs if n}


CASES = []


def case(name, tol=1e-4):
    def deco(fn):
        CASES.append((name, fn, tol))
        return fn

    return deco


# ---- recurrent layers ------------------------------------------------------------------------


def lstm_inputs(T, B, I, H, nd, layout=0, peep=True, lens=True, init=True):
    X = rnd(B, T, I) if layout else rnd(T, B, I)
    ins = [("X", X), ("W", rnd(nd, 4 * H, I, lo=-0.5, hi=0.5)), ("R", rnd(nd, 4 * H, H, lo=-0.5, hi=0.5)),
           ("B", rnd(nd, 8 * H, lo=-0.2, hi=0.2))]
    ins.append(("seq", rng.integers(1, T + 1, size=B).astype(np.int32)) if lens else ("", None))
    st = (B, nd, H) if layout else (nd, B, H)
    ins += [("h0", rnd(*st)), ("c0", rnd(*st))] if init else [("", None), ("", None)]
    ins.append(("P", rnd(nd, 3 * H, lo=-0.3, hi=0.3)) if peep else ("", None))
    return ins


@case("lstm_bidirectional_peepholes_seqlens_init")
def _():
    return one_node("LSTM", lstm_inputs(7, 3, 5, 4, 2), ["Y", "Yh", "Yc"], hidden_size=4, direction="bidirectional")


@case("lstm_reverse_clip_input_forget")
def _():
    return one_node("LSTM", lstm_inputs(6, 2, 3, 5, 1), ["Y", "Yh", "Yc"], hidden_size=5, direction="reverse",
                    clip=0.7, input_forget=1)


@case("lstm_layout1_activations")
def _():
    # onnxruntime has no batch-first LSTM: it runs the same weights on the transposed input
    # (layout 0), and its outputs are transposed back for the comparison.
    ins = lstm_inputs(5, 2, 3, 4, 2, layout=1)
    attrs = dict(hidden_size=4, direction="bidirectional",
                 activations=["HardSigmoid", "Tanh", "Softsign", "HardSigmoid", "Tanh", "Softsign"],
                 activation_alpha=[0.3, 0.25], activation_beta=[0.4, 0.45])
    m1 = one_node("LSTM", ins, ["Y", "Yh", "Yc"], opset=14, layout=1, **attrs)
    t = {"X": (1, 0, 2), "h0": (1, 0, 2), "c0": (1, 0, 2)}
    ins0 = [(n, a.transpose(t[n]) if n in t else a) for n, a in ins]
    m0 = one_node("LSTM", ins0, ["Y", "Yh", "Yc"], opset=14, **attrs)
    back = {"Y": (2, 0, 1, 3), "Yh": (1, 0, 2), "Yc": (1, 0, 2)}
    return m1 + ((m0, lambda outs: {k: np.ascontiguousarray(v.transpose(back[k])) for k, v in outs.items()}),)


@case("lstm_512_steps_128_units")
def _():
    ins = lstm_inputs(512, 1, 64, 128, 1, peep=False, lens=False, init=False)
    return one_node("LSTM", ins[:4], ["Y", "Yh", "Yc"], hidden_size=128)


def gru_inputs(T, B, I, H, nd, lens=True):
    ins = [("X", rnd(T, B, I)), ("W", rnd(nd, 3 * H, I, lo=-0.5, hi=0.5)), ("R", rnd(nd, 3 * H, H, lo=-0.5, hi=0.5)),
           ("B", rnd(nd, 6 * H, lo=-0.2, hi=0.2))]
    ins.append(("seq", rng.integers(1, T + 1, size=B).astype(np.int32)) if lens else ("", None))
    ins.append(("h0", rnd(nd, B, H)))
    return ins


@case("gru_bidirectional_linear_before_reset")
def _():
    return one_node("GRU", gru_inputs(6, 3, 4, 5, 2), ["Y", "Yh"], hidden_size=5, direction="bidirectional",
                    linear_before_reset=1)


@case("gru_reverse_clip")
def _():
    return one_node("GRU", gru_inputs(6, 2, 4, 3, 1), ["Y", "Yh"], hidden_size=3, direction="reverse", clip=0.5)


@case("rnn_relu_bidirectional")
def _():
    ins = [("X", rnd(5, 2, 3)), ("W", rnd(2, 4, 3)), ("R", rnd(2, 4, 4, lo=-0.4, hi=0.4)), ("B", rnd(2, 8)),
           ("seq", np.array([5, 3], np.int32)), ("h0", rnd(2, 2, 4))]
    return one_node("RNN", ins, ["Y", "Yh"], hidden_size=4, direction="bidirectional", activations=["Relu", "Tanh"])


# ---- Einsum patterns of real models ----------------------------------------------------------


def einsum(eq, *shapes):
    ins = [("x%d" % i, rnd(*s)) for i, s in enumerate(shapes)]
    return one_node("Einsum", ins, ["y"], equation=eq)


for _eq, _shapes in [("bhid,bhjd->bhij", [(2, 3, 7, 8), (2, 3, 9, 8)]), ("bhij,bhjd->bhid", [(2, 3, 7, 9), (2, 3, 9, 8)]),
                     ("...ij,...jk->...ik", [(2, 1, 4, 5), (2, 3, 5, 6)]), ("ii->i", [(5, 5)]), ("ij->", [(4, 6)]),
                     ("i,j->ij", [(4,), (3,)]), ("nchw,oc->nohw", [(2, 3, 4, 5), (6, 3)]), ("bij,bjk", [(2, 3, 4), (2, 4, 5)]),
                     ("ijk->kji", [(2, 3, 4)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)])]:
    CASES.append(("einsum " + _eq, (lambda e=_eq, s=_shapes: einsum(e, *s)), 1e-4))


# ---- normalizations, indexing, detection ------------------------------------------------------


@case("layer_normalization_axis1_outputs")
def _():
    return one_node("LayerNormalization", [("x", rnd(2, 3, 4, 5)), ("s", rnd(3, 4, 5)), ("b", rnd(4, 5))],
                    ["y", "mean", "istd"], axis=1, epsilon=1e-3)


@case("layer_normalization_scale_leading_ones")
def _():
    # a [1, 5] scale and [1, 1, 5] bias for a last-axis norm (refused as not broadcasting before)
    return one_node("LayerNormalization", [("x", rnd(2, 3, 5)), ("s", rnd(1, 5)), ("b", rnd(1, 1, 5))], ["y"],
                    epsilon=1e-5)


@case("instance_normalization")
def _():
    return one_node("InstanceNormalization", [("x", rnd(2, 3, 4, 5)), ("s", rnd(3)), ("b", rnd(3))], ["y"])


@case("topk_smallest_axis1")
def _():
    return one_node("TopK", [("x", rnd(3, 50, 4)), ("k", np.array([7], np.int64))], ["v", "i:i64"], axis=1, largest=0)


@case("gathernd_batch_dims")
def _():
    return one_node("GatherND", [("x", rnd(2, 3, 4, 5)), ("i", rng.integers(-3, 3, size=(2, 6, 2)).astype(np.int64))],
                    ["y"], batch_dims=1)


@case("cumsum_reverse_exclusive")
def _():
    return one_node("CumSum", [("x", rnd(3, 4, 5)), ("a", np.array(1, np.int64))], ["y"], reverse=1, exclusive=1)


@case("depth_to_space_crd")
def _():
    return one_node("DepthToSpace", [("x", rnd(2, 8, 3, 4))], ["y"], blocksize=2, mode="CRD")


@case("space_to_depth")
def _():
    return one_node("SpaceToDepth", [("x", rnd(2, 3, 6, 4))], ["y"], blocksize=2)


@case("nonmaxsuppression_random_boxes")
def _():
    xy = rng.uniform(0, 50, size=(2, 60, 2))
    wh = rng.uniform(5, 20, size=(2, 60, 2))
    boxes = np.concatenate([xy, xy + wh], axis=2).astype(np.float32)[..., [1, 0, 3, 2]]
    ins = [("boxes", boxes), ("scores", rng.uniform(0, 1, size=(2, 3, 60)).astype(np.float32)),
           ("m", np.array([10], np.int64)), ("iou", np.array([0.4], np.float32)), ("st", np.array([0.2], np.float32))]
    return one_node("NonMaxSuppression", ins, ["sel:i64"], opset=11)


@case("nonmaxsuppression_no_limit")
def _():
    # torchvision's batched_nms exports max_output_boxes_per_class = INT64_MAX ("no limit") and no
    # score threshold: 2^63 taken through a double kept no box at all (ssdlite320 found nothing)
    xy = rng.uniform(0, 50, size=(1, 40, 2))
    wh = rng.uniform(5, 20, size=(1, 40, 2))
    boxes = np.concatenate([xy, xy + wh], axis=2).astype(np.float32)
    ins = [("boxes", boxes), ("scores", rng.uniform(0, 1, size=(1, 1, 40)).astype(np.float32)),
           ("m", np.array([np.iinfo(np.int64).max], np.int64)), ("iou", np.array([0.55], np.float32))]
    return one_node("NonMaxSuppression", ins, ["sel:i64"], opset=11)


@case("loop_while_int64_max_trip_count")
def _():
    # torch.jit's `while` loops export M = INT64_MAX with the condition: the loop ends when the
    # body's condition turns false (here after 7 steps), not at M, which was refused as a trip
    # count above calq's limit
    body = h.make_graph(
        [h.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         h.make_node("Constant", [], ["seven"], value=h.make_tensor("seven", I64, [], [6])),
         h.make_node("Less", ["i", "seven"], ["c_out"]),
         h.make_node("Identity", ["acc_out"], ["scan"])],
        "body", [vi("i", I64, []), vi("c_in", TP.BOOL, []), vi("acc_in", F, [2, 3])],
        [vi("c_out", TP.BOOL, []), vi("acc_out", F, [2, 3]), vi("scan", F, [2, 3])])
    nodes = [h.make_node("Loop", ["m", "c", "x"], ["acc", "scans"], body=body)]
    ins = [("m", np.array(np.iinfo(np.int64).max, np.int64)), ("c", np.array(True)), ("x", rnd(2, 3))]
    return graph_model(nodes, ins, ["acc", "scans"], 13)


@case("roialign_half_pixel_max")
def _():
    rois = np.array([[1, 1, 6, 7], [0.5, 2, 9, 9], [3, 3, 4, 4.5]], np.float32)
    ins = [("x", rnd(2, 3, 10, 10)), ("rois", rois), ("bi", np.array([0, 1, 1], np.int64))]
    return one_node("RoiAlign", ins, ["y"], opset=16, output_height=3, output_width=4, sampling_ratio=0,
                    spatial_scale=1.0, mode="max")


@case("unique_axis_unsorted")
def _():
    x = rng.integers(0, 3, size=(4, 6)).astype(np.float32)
    x[:, 3] = x[:, 1]
    return one_node("Unique", [("x", x)], ["y", "idx:i64", "inv:i64", "cnt:i64"], axis=1, sorted=0)


@case("dynamic quantization: DynamicQuantizeLinear + MatMulInteger")
def _():
    nodes = [h.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             h.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["y"])]
    w = rng.integers(0, 255, size=(5, 6)).astype(np.uint8)
    wz = rng.integers(100, 150, size=(6,)).astype(np.uint8)
    return graph_model(nodes, [("x", rnd(2, 1, 4, 5, lo=-3, hi=2)), ("w", w), ("wz", wz)],
                       ["xq:u8", "xs", "xz:u8", "y:i32"], 13)


# ---- opsets 18 to 21: the signatures that changed ------------------------------------------


def const(name, arr):
    return h.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(arr, name))


def with_consts(op, data_inputs, consts, outputs, opset, **attrs):
    """A node whose inputs are data_inputs (fed) followed by constants [(name, array)]."""
    nodes = [const(n, a) for n, a in consts]
    nodes.append(h.make_node(op, [n for n, _ in data_inputs] + [n for n, _ in consts], [o.split(":")[0] for o in outputs],
                             **attrs))
    return graph_model(nodes, data_inputs, outputs, opset)


@case("opset18 ReduceMean axes input")
def _():
    return with_consts("ReduceMean", [("x", rnd(2, 3, 4))], [("ax", np.array([0, -1], np.int64))], ["y"], 18, keepdims=0)


@case("opset18 ReduceSumSquare noop_with_empty_axes")
def _():
    return one_node("ReduceSumSquare", [("x", rnd(2, 3))], ["y"], opset=18, noop_with_empty_axes=1)


@case("opset18 ReduceL1 noop_with_empty_axes")
def _():
    return one_node("ReduceL1", [("x", rnd(2, 3))], ["y"], opset=18, noop_with_empty_axes=1)


@case("opset18 ReduceLogSumExp all axes")
def _():
    return one_node("ReduceLogSumExp", [("x", rnd(2, 3, 4))], ["y"], opset=18)


@case("opset20 ReduceMax bool")
def _():
    x = rng.integers(0, 2, size=(3, 4)).astype(np.bool_)
    return with_consts("ReduceMax", [("x", x)], [("ax", np.array([1], np.int64))], ["y:bool"], 20)


@case("opset18 Pad axes input")
def _():
    return with_consts("Pad", [("x", rnd(2, 3, 4))], [("p", np.array([1, 2, 0, 3], np.int64)), ("v", np.array(0.5, np.float32)),
                                                     ("ax", np.array([0, 2], np.int64))], ["y"], 18, mode="constant")


@case("opset19 Pad wrap")
def _():
    return with_consts("Pad", [("x", rnd(1, 3, 4))], [("p", np.array([0, 1, 2, 0, 2, 1], np.int64))], ["y"], 19, mode="wrap")


@case("opset18 Split num_outputs uneven")
def _():
    return one_node("Split", [("x", rnd(7, 3))], ["a", "b", "c"], opset=18, axis=0, num_outputs=3)


def resize(consts, opset=18, x=None, **attrs):
    x = rnd(1, 2, 9, 11) if x is None else x
    return with_consts("Resize", [("x", x)], consts, ["y"], opset, **attrs)


_r0 = ("roi", np.array([], np.float32))
_r1 = ("sc", np.array([], np.float32))


@case("opset18 Resize axes scales linear")
def _():
    return resize([_r0, ("sc", np.array([0.6, 1.7], np.float32))], axes=[2, 3], mode="linear")


@case("opset18 Resize antialias linear downscale")
def _():
    return resize([_r0, ("sc", np.array([1, 1, 0.4, 0.6], np.float32))], x=rnd(1, 2, 20, 17), mode="linear", antialias=1)


@case("opset18 Resize antialias cubic downscale")
def _():
    return resize([_r0, ("sc", np.array([1, 1, 0.35, 0.5], np.float32))], x=rnd(1, 2, 20, 17), mode="cubic", antialias=1)


@case("opset18 Resize antialias cubic sizes axes")
def _():
    return resize([_r0, _r1, ("sz", np.array([7, 5], np.int64))], x=rnd(1, 2, 20, 17), axes=[2, 3], mode="cubic",
                  antialias=1, exclude_outside=1)


@case("opset18 Resize keep_aspect_ratio not_larger")
def _():
    return resize([_r0, _r1, ("sz", np.array([20, 20], np.int64))], axes=[2, 3], mode="linear",
                  keep_aspect_ratio_policy="not_larger")


@case("opset18 Resize keep_aspect_ratio not_smaller nearest")
def _():
    return resize([_r0, _r1, ("sz", np.array([5, 5], np.int64))], axes=[2, 3], mode="nearest",
                  keep_aspect_ratio_policy="not_smaller")


@case("opset19 Resize half_pixel_symmetric")
def _():
    return resize([_r0, ("sc", np.array([1, 1, 1.7, 0.45], np.float32))], opset=19, mode="linear",
                  coordinate_transformation_mode="half_pixel_symmetric")


@case("opset18 ScatterND max")
def _():
    return one_node("ScatterND", [("x", rnd(4, 3)), ("i", np.array([[1], [3], [1]], np.int64)), ("u", rnd(3, 3))], ["y"],
                    opset=18, reduction="max")


@case("opset18 ScatterElements min")
def _():
    return one_node("ScatterElements", [("x", rnd(3, 4)), ("i", np.array([[0, 3], [2, 2]], np.int64)), ("u", rnd(2, 2))],
                    ["y"], opset=18, axis=1, reduction="min")


@case("opset18 GroupNormalization")
def _():
    return one_node("GroupNormalization", [("x", rnd(2, 6, 3, 4)), ("s", rnd(3)), ("b", rnd(3))], ["y"], opset=18,
                    num_groups=3)


@case("opset21 GroupNormalization per channel")
def _():
    return one_node("GroupNormalization", [("x", rnd(2, 6, 3, 4)), ("s", rnd(6)), ("b", rnd(6))], ["y"], opset=21,
                    num_groups=3, epsilon=1e-3)


@case("opset20 Gelu")
def _():
    return one_node("Gelu", [("x", rnd(3, 40, lo=-4, hi=4))], ["y"], opset=20)


@case("opset20 Gelu tanh")
def _():
    return one_node("Gelu", [("x", rnd(3, 40, lo=-4, hi=4))], ["y"], opset=20, approximate="tanh")


@case("opset18 Mish")
def _():
    return one_node("Mish", [("x", rnd(3, 40, lo=-6, hi=6))], ["y"], opset=18)


@case("opset18 Bitwise")
def _():
    a = rng.integers(-100, 100, size=(3, 4)).astype(np.int32)
    b = rng.integers(-100, 100, size=(4,)).astype(np.int32)
    nodes = [h.make_node("BitwiseAnd", ["a", "b"], ["and"]), h.make_node("BitwiseOr", ["a", "b"], ["or"]),
             h.make_node("BitwiseXor", ["a", "b"], ["xor"]), h.make_node("BitwiseNot", ["a"], ["not"])]
    return graph_model(nodes, [("a", a), ("b", b)], ["and:i32", "or:i32", "xor:i32", "not:i32"], 18)


@case("opset18 CenterCropPad")
def _():
    return with_consts("CenterCropPad", [("x", rnd(2, 7, 4))], [("s", np.array([4, 7], np.int64))], ["y"], 18, axes=[1, 2])


@case("opset18 Col2Im")
def _():
    return with_consts("Col2Im", [("x", rnd(1, 2 * 6, 25))], [("img", np.array([5, 6], np.int64)), ("blk", np.array([2, 3], np.int64))],
                       ["y"], 18, strides=[1, 1], pads=[0, 1, 1, 0], dilations=[1, 1])


@case("opset20 AffineGrid + GridSample linear")
def _():
    theta = np.array([[[0.9, 0.2, 0.1], [-0.1, 1.1, -0.05]], [[1.2, 0, 0], [0, 0.8, 0.1]]], np.float32)
    nodes = [const("size", np.array([2, 3, 5, 7], np.int64)), h.make_node("AffineGrid", ["theta", "size"], ["grid"]),
             h.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="border")]
    return graph_model(nodes, [("theta", theta), ("x", rnd(2, 3, 6, 6))], ["grid", "y"], 20)


@case("opset20 GridSample cubic reflection")
def _():
    return one_node("GridSample", [("x", rnd(1, 2, 5, 6)), ("g", rnd(1, 4, 3, 2, lo=-1.2, hi=1.2))], ["y"], opset=20,
                    mode="cubic", padding_mode="reflection", align_corners=1)


@case("opset19 AveragePool dilations")
def _():
    return one_node("AveragePool", [("x", rnd(1, 2, 9, 9))], ["y"], opset=19, kernel_shape=[2, 3], dilations=[2, 2],
                    strides=[1, 2], pads=[1, 0, 1, 1], count_include_pad=0)


@case("opset21 DequantizeLinear blocked")
def _():
    x = rng.integers(-128, 127, size=(4, 6)).astype(np.int8)
    return with_consts("DequantizeLinear", [("x", x)], [("s", rnd(4, 2, lo=0.01, hi=0.1)),
                                                       ("z", rng.integers(-3, 3, size=(4, 2)).astype(np.int8))],
                       ["y"], 21, axis=1, block_size=3)


@case("opset21 QuantizeLinear blocked output_dtype")
def _():
    return with_consts("QuantizeLinear", [("x", rnd(4, 6))], [("s", rnd(2, 6, lo=0.01, hi=0.1))], ["y:i8"], 21, axis=0,
                       block_size=2, output_dtype=TP.INT8)


# ---- running -----------------------------------------------------------------------------------


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout + r.stderr


def safe(n):
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in n)


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__)
        return 2
    calq, ort_js = args[0], args[1]
    only = args[args.index("--only") + 1] if "--only" in args else None
    keep = args[args.index("--keep") + 1] if "--keep" in args else None
    node_path = os.environ.get("NODE_PATH") or os.path.join(
        os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")), "node_modules")
    if not os.path.isdir(os.path.join(node_path, "onnxruntime-node")):
        print("SKIP: onnxruntime-node not found in " + node_path)
        return 77
    env = dict(os.environ, NODE_PATH=node_path)
    work = keep or tempfile.mkdtemp()
    fails = 0
    for name, build, tol in CASES:
        if only and only not in name:
            continue
        d = os.path.join(work, safe(name))
        os.makedirs(d, exist_ok=True)
        built = build()
        model, feeds = built[0], built[1]
        ort_model, ort_feeds, fix = model, feeds, None
        if len(built) > 2:  # onnxruntime runs an equivalent model instead
            (ort_model, ort_feeds), fix = built[2]
        path = os.path.join(d, "model.onnx")
        onnx.save(model, path)
        ins = []
        for n, a in feeds.items():
            f = os.path.join(d, safe(n) + ".in.npy")
            np.save(f, a)
            ins.append("%s=%s" % (n, f))
        outs = [o.name for o in model.graph.output]
        ort_path, ort_ins = path, ins
        if fix:
            ort_path = os.path.join(d, "ort_model.onnx")
            onnx.save(ort_model, ort_path)
            ort_ins = []
            for n, a in ort_feeds.items():
                f = os.path.join(d, safe(n) + ".ort.npy")
                np.save(f, a)
                ort_ins.append("%s=%s" % (n, f))
        os.makedirs(os.path.join(d, "ort"), exist_ok=True)
        r = subprocess.run(["node", ort_js, ort_path, os.path.join(d, "ort")] + ort_ins, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode == 0 and fix:
            got = {o: np.load(os.path.join(d, "ort", safe(o) + ".npy")) for o in outs}
            for o, a in fix(got).items():
                np.save(os.path.join(d, "ort", safe(o) + ".npy"), a)
        if r.returncode != 0:
            print("FAIL %-45s onnxruntime: %s" % (name, r.stderr.strip()[:300]))
            fails += 1
            continue
        for mode in ("ref", "fast"):
            od = os.path.join(d, mode)
            cmd = [calq, "run", path, "--output-dir", od] + sum([["--input", i] for i in ins], [])
            if mode == "ref":
                cmd.append("--ref")
            t0 = time.time()
            rc, log = run(cmd)
            dt = time.time() - t0
            if rc != 0:
                print("FAIL %-45s calq %s: %s" % (name, mode, log.strip()[:400]))
                fails += 1
                break
            worst = 0.0
            bad = None
            for o in outs:
                want = np.load(os.path.join(d, "ort", safe(o) + ".npy"))
                got = np.load(os.path.join(od, safe(o) + ".npy"))
                if want.shape != got.shape or want.dtype != got.dtype:
                    bad = "%s: %s %s, onnxruntime %s %s" % (o, got.shape, got.dtype, want.shape, want.dtype)
                    break
                if want.size == 0:
                    continue
                err = np.abs(got.astype(np.float64) - want.astype(np.float64)) / (1.0 + np.abs(want.astype(np.float64)))
                worst = max(worst, float(err.max()))
                if not worst <= tol:
                    bad = "%s: max relative difference %.3g > %.3g" % (o, worst, tol)
                    break
            if bad:
                print("FAIL %-45s %s: %s" % (name, mode, bad))
                fails += 1
                break
            if mode == "fast":
                print("ok   %-45s max rel diff %.2g (calq run %.2f s incl. process start)" % (name, worst, dt))
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    print("%d case(s) failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
