"""OpenCV's DNN module as the reference for calq's Caffe frontend (run with /usr/bin/python3).

  caffe_opencv_run.py run NET.prototxt NET.caffemodel INPUT.npy OUTDIR [LAYER,LAYER...]
      Runs the net on the input tensor (written by calq, so both runtimes see the same data)
      and writes OUTDIR/<output layer>.npy for each of OpenCV's unconnected output layers;
      prints their names, one per line. Listed extra layers are written too (not printed).

  caffe_opencv_run.py ssd DIR
      Writes DIR/ssd.prototxt, DIR/ssd.caffemodel (random weights) and DIR/data.npy: a small
      MobileNet-SSD-like detector (depthwise convolutions, BatchNorm/Scale, Normalize, two heads
      with Permute/Flatten/PriorBox/Concat, Softmax over classes, DetectionOutput with top_k /
      keep_top_k truncation) and a segmentation branch (Interp, Crop).

  caffe_opencv_run.py outliers DIR
      Writes DIR/outliers.prototxt, DIR/outliers.caffemodel (random weights) and DIR/data/<i>.npy
      (4 batches): a CNN whose second Convolution reads activations about 50x larger on two of its
      input channels (the pattern DMQ balancing is for, tests/peers/dmq_model.py's cnn in Caffe):
      Convolution - BatchNorm - Scale (gamma 50 on channels 2 and 9) - ReLU - Convolution (its
      weights 1/50 there) - ReLU - depthwise Convolution - ReLU - AVE global Pooling - InnerProduct.

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


OUTLIERS = """name: "outliers"
input: "data"
input_shape { dim: 1 dim: 3 dim: 16 dim: 16 }
layer { name: "c1" type: "Convolution" bottom: "data" top: "c1" convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
layer { name: "bn" type: "BatchNorm" bottom: "c1" top: "c1" }
layer { name: "sc" type: "Scale" bottom: "c1" top: "c1" scale_param { bias_term: true } }
layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "c2" type: "Convolution" bottom: "c1" top: "c2" convolution_param { num_output: 24 kernel_size: 3 pad: 1 } }
layer { name: "r2" type: "ReLU" bottom: "c2" top: "c2" }
layer { name: "dw" type: "Convolution" bottom: "c2" top: "dw"
  convolution_param { num_output: 24 kernel_size: 3 pad: 1 group: 24 } }
layer { name: "r3" type: "ReLU" bottom: "dw" top: "dw" }
layer { name: "gap" type: "Pooling" bottom: "dw" top: "gap" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "gap" top: "fc" inner_product_param { num_output: 10 } }
"""


def outliers(d):
    rng = np.random.default_rng(20261202)

    def normal(*shape, s):
        return rng.normal(0.0, s, size=shape).astype(np.float32)

    gamma = np.ones(16, np.float32)
    gamma[[2, 9]] = 50.0
    c2 = normal(24, 16, 3, 3, s=0.08)
    c2[:, [2, 9]] /= 50.0  # the outlier channels weigh like the others in the output
    layers = [
        layer("c1", [normal(16, 3, 3, 3, s=0.2), normal(16, s=0.1)]),
        layer("bn", [np.zeros(16, np.float32), np.ones(16, np.float32), np.array([1.0], np.float32)]),
        layer("sc", [gamma, np.full(16, 0.1, np.float32)]),
        layer("c2", [c2, normal(24, s=0.1)]),
        layer("dw", [normal(24, 1, 3, 3, s=0.3), normal(24, s=0.1)]),
        layer("fc", [normal(10, 24, s=0.3), normal(10, s=0.1)]),
    ]
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    with open(os.path.join(d, "outliers.prototxt"), "w") as f:
        f.write(OUTLIERS)
    with open(os.path.join(d, "outliers.caffemodel"), "wb") as f:
        f.write(field(1, b"outliers") + b"".join(layers))
    for k in range(4):
        np.save(os.path.join(d, "data", "%d.npy" % k), rng.normal(0, 1, size=(1, 3, 16, 16)).astype(np.float32))


SSD = """name: "ssd"
input: "data"
input_shape { dim: 1 dim: 3 dim: 64 dim: 64 }
layer { name: "conv0" type: "Convolution" bottom: "data" top: "conv0"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 bias_term: false } }
layer { name: "conv0/bn" type: "BatchNorm" bottom: "conv0" top: "conv0" }
layer { name: "conv0/scale" type: "Scale" bottom: "conv0" top: "conv0" scale_param { bias_term: true } }
layer { name: "conv0/relu" type: "ReLU" bottom: "conv0" top: "conv0" }
layer { name: "conv1/dw" type: "Convolution" bottom: "conv0" top: "conv1/dw"
  convolution_param { num_output: 8 kernel_size: 3 stride: 2 pad: 1 group: 8 } }
layer { name: "conv1/dw/relu" type: "ReLU" bottom: "conv1/dw" top: "conv1/dw" }
layer { name: "conv1" type: "Convolution" bottom: "conv1/dw" top: "conv1" convolution_param { num_output: 16 kernel_size: 1 } }
layer { name: "conv1/relu" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv1_norm" type: "Normalize" bottom: "conv1" top: "conv1_norm"
  norm_param { across_spatial: false channel_shared: false eps: 1e-10 } }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
  convolution_param { num_output: 16 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "conv2/relu" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "h1_loc" type: "Convolution" bottom: "conv1_norm" top: "h1_loc"
  convolution_param { num_output: 24 kernel_size: 3 pad: 1 } }
layer { name: "h1_loc_perm" type: "Permute" bottom: "h1_loc" top: "h1_loc_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "h1_loc_flat" type: "Flatten" bottom: "h1_loc_perm" top: "h1_loc_flat" flatten_param { axis: 1 } }
layer { name: "h1_conf" type: "Convolution" bottom: "conv1_norm" top: "h1_conf"
  convolution_param { num_output: 24 kernel_size: 3 pad: 1 } }
layer { name: "h1_conf_perm" type: "Permute" bottom: "h1_conf" top: "h1_conf_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "h1_conf_flat" type: "Flatten" bottom: "h1_conf_perm" top: "h1_conf_flat" flatten_param { axis: 1 } }
layer { name: "h1_prior" type: "PriorBox" bottom: "conv1_norm" bottom: "data" top: "h1_prior"
  prior_box_param { min_size: 12 max_size: 24 aspect_ratio: 2 aspect_ratio: 3 flip: true clip: true
                    variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 offset: 0.5 } }
layer { name: "h2_loc" type: "Convolution" bottom: "conv2" top: "h2_loc" convolution_param { num_output: 12 kernel_size: 1 } }
layer { name: "h2_loc_perm" type: "Permute" bottom: "h2_loc" top: "h2_loc_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "h2_loc_flat" type: "Flatten" bottom: "h2_loc_perm" top: "h2_loc_flat" }
layer { name: "h2_conf" type: "Convolution" bottom: "conv2" top: "h2_conf" convolution_param { num_output: 12 kernel_size: 1 } }
layer { name: "h2_conf_perm" type: "Permute" bottom: "h2_conf" top: "h2_conf_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "h2_conf_flat" type: "Flatten" bottom: "h2_conf_perm" top: "h2_conf_flat" }
layer { name: "h2_prior" type: "PriorBox" bottom: "conv2" bottom: "data" top: "h2_prior"
  prior_box_param { min_size: 28 aspect_ratio: 2 aspect_ratio: 0.5 aspect_ratio: 2 flip: false clip: false
                    variance: 0.1 step: 16 } }
layer { name: "mbox_loc" type: "Concat" bottom: "h1_loc_flat" bottom: "h2_loc_flat" top: "mbox_loc" concat_param { axis: 1 } }
layer { name: "mbox_conf" type: "Concat" bottom: "h1_conf_flat" bottom: "h2_conf_flat" top: "mbox_conf" concat_param { axis: 1 } }
layer { name: "mbox_prior" type: "Concat" bottom: "h1_prior" bottom: "h2_prior" top: "mbox_prior" concat_param { axis: 2 } }
layer { name: "mbox_conf_reshape" type: "Reshape" bottom: "mbox_conf" top: "mbox_conf_reshape"
  reshape_param { shape { dim: 0 dim: -1 dim: 4 } } }
layer { name: "mbox_conf_softmax" type: "Softmax" bottom: "mbox_conf_reshape" top: "mbox_conf_softmax" softmax_param { axis: 2 } }
layer { name: "mbox_conf_flatten" type: "Flatten" bottom: "mbox_conf_softmax" top: "mbox_conf_flatten" flatten_param { axis: 1 } }
layer { name: "detection_out" type: "DetectionOutput" bottom: "mbox_loc" bottom: "mbox_conf_flatten" bottom: "mbox_prior"
  top: "detection_out"
  detection_output_param { num_classes: 4 share_location: true background_label_id: 0
    nms_param { nms_threshold: 0.45 top_k: 40 } code_type: CENTER_SIZE keep_top_k: 25 confidence_threshold: 0.2 } }
layer { name: "data_crop" type: "Crop" bottom: "data" bottom: "conv1" top: "data_crop" crop_param { axis: 2 offset: 3 offset: 1 } }
"""

# PSPNet's Interp (not in OpenCV 4.6's Caffe schema): checked against numpy's align-corners
# bilinear resize by caffe_ssd.sh instead.
INTERP = """name: "interp"
input: "data"
input_shape { dim: 1 dim: 2 dim: 5 dim: 7 }
layer { name: "zoom" type: "Interp" bottom: "data" top: "zoom" interp_param { zoom_factor: 3 } }
layer { name: "shrink" type: "Interp" bottom: "data" top: "shrink" interp_param { shrink_factor: 2 } }
layer { name: "fixed" type: "Interp" bottom: "data" top: "fixed" interp_param { height: 9 width: 4 } }
"""


def ssd(d):
    rng = np.random.default_rng(20260101)

    def normal(*shape, s=0.3):
        return rng.normal(0.0, s, size=shape).astype(np.float32)

    layers = [
        layer("conv0", [normal(8, 3, 3, 3)]),
        layer("conv0/bn", [normal(8) * 2, np.abs(normal(8)) * 2 + 0.1, np.array([2.0], np.float32)]),
        layer("conv0/scale", [normal(8) + 1, normal(8)]),
        layer("conv1/dw", [normal(8, 1, 3, 3), normal(8)]),
        layer("conv1", [normal(16, 8, 1, 1), normal(16)]),
        layer("conv1_norm", [np.abs(normal(16)) * 20 + 5]),
        layer("conv2", [normal(16, 16, 3, 3, s=0.15), normal(16)]),
        layer("h1_loc", [normal(24, 16, 3, 3, s=0.02), normal(24, s=0.05)]),
        layer("h1_conf", [normal(24, 16, 3, 3, s=0.05), normal(24)]),
        layer("h2_loc", [normal(12, 16, 1, 1, s=0.05), normal(12, s=0.05)]),
        layer("h2_conf", [normal(12, 16, 1, 1), normal(12)]),
    ]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "ssd.prototxt"), "w") as f:
        f.write(SSD)
    with open(os.path.join(d, "ssd.caffemodel"), "wb") as f:
        f.write(field(1, b"ssd") + b"".join(layers))
    for k in range(3):
        np.save(os.path.join(d, "data%s.npy" % ("" if k == 0 else str(k))),
                rng.uniform(0, 1, size=(1, 3, 64, 64)).astype(np.float32))
    with open(os.path.join(d, "interp.prototxt"), "w") as f:
        f.write(INTERP)
    with open(os.path.join(d, "interp.caffemodel"), "wb") as f:  # no learned blobs
        f.write(field(1, b"interp"))
    np.save(os.path.join(d, "interp_data.npy"), rng.uniform(-1, 1, size=(1, 2, 5, 7)).astype(np.float32))


if __name__ == "__main__":
    if len(sys.argv) in (6, 7) and sys.argv[1] == "run":
        run(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "zoo":
        zoo(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "outliers":
        outliers(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "ssd":
        ssd(sys.argv[2])
    else:
        sys.exit(__doc__)
