"""OpenCV's DNN module as the reference for calq's Caffe frontend (run with /usr/bin/python3).

  caffe_opencv_run.py run NET.prototxt NET.caffemodel INPUT.npy OUTDIR [LAYER,LAYER...]
      Runs the net on the input tensor (written by calq, so both runtimes see the same data)
      and writes OUTDIR/<output layer>.npy for each of OpenCV's unconnected output layers;
      prints their names, one per line. Listed extra layers are written too (not printed).

  caffe_opencv_run.py zoo DIR
      Writes DIR/zoo.prototxt, DIR/zoo.caffemodel (random weights) and DIR/data.npy: a small
      net using most layer types calq maps, with their less common parameters (in-place
      BatchNorm/Scale/ReLU chains, _h/_w forms, groups, dilation, padded ceil-mode pooling, both
      LRN regions, Eltwise coefficients, Slice points, Permute, Reshape with 0 and -1, ...).
      The caffemodel is encoded here, by hand, in protobuf's wire format. LRN keeps the
      default k = 1: OpenCV 4.6 ignores Caffe's k (it reads a `bias` parameter instead), so
      k != 1 is covered by calq's unit tests against hand-computed values.
"""
import os
import struct
import sys

import numpy as np


def run(proto, weights, input_npy, outdir, extra=""):
    import cv2

    net = cv2.dnn.readNetFromCaffe(proto, weights)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    net.setInput(np.load(input_npy).astype(np.float32))
    names = list(net.getUnconnectedOutLayersNames())
    extra = [n for n in extra.split(",") if n and n not in names]
    outs = net.forward(names + extra)
    os.makedirs(outdir, exist_ok=True)
    for name, out in zip(names + extra, outs):
        np.save(os.path.join(outdir, name + ".npy"), np.ascontiguousarray(out, dtype=np.float32))
    for name in names:
        print(name)


# ---- protobuf wire format (only what a caffemodel needs) ----------------------------------------


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def blob(arr):
    arr = np.asarray(arr, dtype=np.float32)
    shape = b"".join(varint(int(d)) for d in arr.shape)
    return field(7, field(1, shape)) + field(5, struct.pack("<%df" % arr.size, *arr.ravel()))


def layer(name, blobs):
    return field(100, field(1, name.encode()) + b"".join(field(7, blob(b)) for b in blobs))


ZOO = """name: "zoo"
input: "data"
input_shape { dim: 1 dim: 4 dim: 9 dim: 11 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 6 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0 } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" batch_norm_param { eps: 0.001 } }
layer { name: "sc1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" relu_param { negative_slope: 0.1 } }
layer { name: "gconv" type: "Convolution" bottom: "conv1" top: "gconv"
  convolution_param { num_output: 4 group: 2 kernel_size: 3 pad: 2 dilation: 2 bias_term: false } }
layer { name: "prelu" type: "PReLU" bottom: "gconv" top: "gconv" }
layer { name: "pa" type: "Pooling" bottom: "gconv" top: "pa"
  pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "pm" type: "Pooling" bottom: "gconv" top: "pm" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "up" type: "Deconvolution" bottom: "pa" top: "up"
  convolution_param { num_output: 4 kernel_size: 2 stride: 2 } }
layer { name: "gap" type: "Pooling" bottom: "up" top: "gap" pooling_param { pool: AVE global_pooling: true } }
layer { name: "lrn1" type: "LRN" bottom: "gconv" top: "lrn1" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 } }
layer { name: "lrn2" type: "LRN" bottom: "gconv" top: "lrn2"
  lrn_param { local_size: 3 alpha: 0.3 beta: 0.6 norm_region: WITHIN_CHANNEL } }
layer { name: "elt" type: "Eltwise" bottom: "lrn1" bottom: "lrn2" top: "elt"
  eltwise_param { operation: SUM coeff: 0.5 coeff: -2 } }
layer { name: "eprod" type: "Eltwise" bottom: "lrn1" bottom: "gconv" top: "eprod" eltwise_param { operation: PROD } }
layer { name: "emax" type: "Eltwise" bottom: "lrn1" bottom: "lrn2" bottom: "gconv" top: "emax"
  eltwise_param { operation: MAX } }
layer { name: "cat" type: "Concat" bottom: "elt" bottom: "eprod" bottom: "emax" top: "cat" concat_param { axis: 1 } }
layer { name: "slice" type: "Slice" bottom: "cat" top: "s0" top: "s1" top: "s2"
  slice_param { axis: 1 slice_point: 3 slice_point: 7 } }
layer { name: "pw" type: "Power" bottom: "s0" top: "pw" power_param { power: 2 scale: 0.5 shift: 1 } }
layer { name: "ab" type: "AbsVal" bottom: "s1" top: "ab" }
layer { name: "sg" type: "Sigmoid" bottom: "s2" top: "sg" }
layer { name: "th" type: "TanH" bottom: "pw" top: "th" }
layer { name: "el" type: "ELU" bottom: "ab" top: "el" elu_param { alpha: 0.7 } }
layer { name: "fl" type: "Flatten" bottom: "sg" top: "fl" }
layer { name: "ip" type: "InnerProduct" bottom: "fl" top: "ip" inner_product_param { num_output: 7 } }
layer { name: "drop" type: "Dropout" bottom: "ip" top: "ip" dropout_param { dropout_ratio: 0.3 } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
layer { name: "ip2" type: "InnerProduct" bottom: "el" top: "ip2" inner_product_param { num_output: 5 axis: 2 } }
layer { name: "perm" type: "Permute" bottom: "th" top: "perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "resh" type: "Reshape" bottom: "perm" top: "resh" reshape_param { shape { dim: 0 dim: -1 dim: 2 } } }
layer { name: "prob2" type: "Softmax" bottom: "resh" top: "prob2" softmax_param { axis: 2 } }
"""


def zoo(d):
    rng = np.random.default_rng(20240531)

    def normal(*shape, s=0.5):
        return rng.normal(0.0, s, size=shape).astype(np.float32)

    layers = [
        layer("conv1", [normal(6, 4, 3, 2), normal(6)]),
        layer("bn1", [normal(6) * 3.7, np.abs(normal(6)) * 3.7 + 0.1, np.array([3.7], np.float32)]),
        layer("sc1", [normal(6) + 1, normal(6)]),
        layer("gconv", [normal(4, 3, 3, 3)]),
        layer("prelu", [normal(4, s=0.3)]),
        layer("up", [normal(4, 4, 2, 2), normal(4)]),
        layer("ip", [normal(7, 250, s=0.1), normal(7)]),
        layer("ip2", [normal(5, 50, s=0.2), normal(5)]),
    ]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "zoo.prototxt"), "w") as f:
        f.write(ZOO)
    with open(os.path.join(d, "zoo.caffemodel"), "wb") as f:
        f.write(field(1, b"zoo") + b"".join(layers))
    np.save(os.path.join(d, "data.npy"), rng.uniform(-1, 1, size=(1, 4, 9, 11)).astype(np.float32))


if __name__ == "__main__":
    if len(sys.argv) in (6, 7) and sys.argv[1] == "run":
        run(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "zoo":
        zoo(sys.argv[2])
    else:
        sys.exit(__doc__)
