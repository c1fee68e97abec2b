#!/usr/bin/python3
"""Careless arguments to the Python binding (probe h2), on a small Conv model made with the onnx
package:

1. integers the C side holds in an int or int64_t (batch_num, threads, cache_mb, an input dim)
   are checked in Python: ctypes stores them modulo 2**32 / 2**64 without a word, so
   batch_num=2**32 + 1 calibrated 1 batch and set_input_shape((2**64 + 1, ...)) set dim 1;
   a float that is not a whole number is refused instead of cut (1.7 -> 1);
2. batches in the other byte order (">f4", as read from a big-endian file) calibrate as the
   same values in native order do (they were refused: "a >f4 array; calq takes float32, ...");
4. None or a wrong type for each public argument (probe h3) raises TypeError naming the argument
   (or calq.Error for a wrong value), never an AttributeError from inside the binding, a NULL
   pointer handed to the library, or a callback that fails at every message (set_log(5)).

Usage: args.py  (CALQ_LIBRARY and PYTHONPATH set by ctest)"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("SKIP: numpy or onnx is not installed (Debian: python3-numpy, python3-onnx)")
    sys.exit(77)

import calq

fails = []


def fail(msg):
    print("FAIL:", msg)
    fails.append(msg)


def tiny_model(path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv", pads=[1, 1, 1, 1])], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def refused(what, call, needle):
    """call() must raise calq.Error BAD_PARAMETERS whose message holds needle."""
    try:
        call()
    except calq.Error as e:
        if e.status_name != "BAD_PARAMETERS" or needle not in e.message:
            fail("%s: %s" % (what, e))
        return
    fail("%s was accepted" % what)


def raises_type(what, call, needle):
    """call() must raise TypeError (a wrong type) or calq.Error (a wrong value) naming the argument."""
    try:
        call()
    except (TypeError, calq.Error) as e:
        if needle not in str(e):
            fail("%s: %s: %s lacks %r" % (what, type(e).__name__, e, needle))
        return
    except Exception as e:
        fail("%s raised %s: %s" % (what, type(e).__name__, e))
        return
    fail("%s was accepted" % what)


def main():
    tmp = tempfile.mkdtemp(prefix="calq_args_")
    path = os.path.join(tmp, "tiny.onnx")
    tiny_model(path)
    m = calq.load(path, input_shape={"x": (1, 3, 8, 8)})
    rng = np.random.default_rng(1)
    batches = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(3)]
    out = os.path.join(tmp, "out")

    # 1. integers out of the C type's range, and fractions
    refused("batch_num 2**32 + 1", lambda: calq.calibrate(m, batches, out, batch_num=2**32 + 1, save_type=None),
            "batch_num is 4294967297")
    refused("batch_num 1.5", lambda: calq.calibrate(m, batches, out, batch_num=1.5, save_type=None), "batch_num")
    refused("threads 2**40", lambda: calq.calibrate(m, batches, out, threads=2**40, save_type=None),
            "threads is 1099511627776")
    refused("cache_mb 2**32", lambda: calq.calibrate(m, batches, out, cache_mb=2**32, save_type=None),
            "cache_mb is 4294967296")
    refused("compare batch_num 2**32 + 1", lambda: calq.compare(m, m, batches, batch_num=2**32 + 1),
            "batch_num is 4294967297")
    refused("set_input_shape 2**64 + 1", lambda: m.set_input_shape("x", (2**64 + 1, 3, 8, 8)),
            "is 18446744073709551617")
    refused("set_input_shape 1.7", lambda: m.set_input_shape("x", (1.7, 3, 8, 8)), "1.7")
    if m.inputs[0].shape != (1, 3, 8, 8):
        fail("a refused set_input_shape changed the input: %s" % (m.inputs[0],))
    # what stays accepted: whole floats, numpy integers
    r = calq.calibrate(m, batches, out, batch_num=np.int64(3), threads=2.0, save_type=None)
    if '"batch_num": 3' not in open(r.config).read():
        fail("batch_num np.int64(3) did not calibrate 3 batches")

    # 2. byte order
    swapped = [{"x": b["x"].astype(b["x"].dtype.newbyteorder())} for b in batches]
    try:
        r2 = calq.calibrate(m, swapped, os.path.join(tmp, "swapped"), save_type=None)
        if open(r2.record).read() != open(r.record).read():
            fail("batches in the other byte order gave another record")
    except calq.Error as e:
        fail("batches in the other byte order: %s" % e)

    # 3. run with a list or a bare array instead of the dict of names (a TypeError before)
    x = batches[0]["x"]
    refused("run([x])", lambda: m.run([x]), "feeds must be a dict")
    refused("run(x)", lambda: m.run(x), "feeds must be a dict")

    m.set_input_shape("x", (np.int32(2), 3, 8, 8))
    if m.inputs[0].shape != (2, 3, 8, 8):
        fail("set_input_shape with numpy ints: %s" % (m.inputs[0],))

    # 4. None and wrong types, one argument at a time
    m.set_input_shape("x", (1, 3, 8, 8))
    rec = os.path.join(tmp, "missing_record.txt")
    for what, call, needle in [
            ("load(None)", lambda: calq.load(None), "path"),
            ("load(path, weights=5)", lambda: calq.load(path, weights=5), "weights"),
            ("load(path, input_shape=5)", lambda: calq.load(path, input_shape=5), "input_shape"),
            ("load(path, input_shape={None: ...})", lambda: calq.load(path, input_shape={None: (1, 3, 8, 8)}),
             "name"),
            ("set_input_shape(None, shape)", lambda: m.set_input_shape(None, (1, 3, 8, 8)), "name"),
            ("set_input_shape('x', None)", lambda: m.set_input_shape("x", None), "shape"),
            ("run(None)", lambda: m.run(None), "feeds"),
            ("run({'x': None})", lambda: m.run({"x": None}), "input 'x'"),
            ("save(None, ...)", lambda: calq.save(None, rec, out), "m must be a calq.Model"),
            ("save(m, None, ...)", lambda: calq.save(m, None, out), "record"),
            ("save(m, record, None)", lambda: calq.save(m, rec, None), "save_path"),
            ("save(config=5)", lambda: calq.save(m, rec, out, config=5), "config"),
            ("save(formats=5)", lambda: calq.save(m, rec, out, formats=5), "formats"),
            ("calibrate(None, ...)", lambda: calq.calibrate(None, batches, out), "m must be a calq.Model"),
            ("calibrate(m, None, ...)", lambda: calq.calibrate(m, None, out), "batches"),
            ("calibrate(m, batches, None)", lambda: calq.calibrate(m, batches, None), "save_path"),
            ("calibrate([None])", lambda: calq.calibrate(m, [None], out, save_type=None), "a batch is a dict"),
            ("calibrate(skip_layers=[None])", lambda: calq.calibrate(m, batches, out, skip_layers=[None]),
             "skip_layers"),
            ("calibrate(skip_layers=5)", lambda: calq.calibrate(m, batches, out, skip_layers=5), "skip_layers"),
            ("calibrate(act_algo=5)", lambda: calq.calibrate(m, batches, out, act_algo=5), "act_algo"),
            ("calibrate(config=5)", lambda: calq.calibrate(m, batches, out, config=5), "config"),
            ("calibrate(threads=None)", lambda: calq.calibrate(m, batches, out, threads=None), "threads"),
            ("compare(None, m, ...)", lambda: calq.compare(None, m, batches), "float_model"),
            ("compare(m, None, ...)", lambda: calq.compare(m, None, batches), "quantized"),
            ("compare(m, m, None)", lambda: calq.compare(m, m, None), "batches"),
            ("set_log(5)", lambda: calq.set_log(5), "fn"),
            ("set_log(print, level=None)", lambda: calq.set_log(print, level=None), "level"),
            ("set_log(print, level='loud')", lambda: calq.set_log(print, level="loud"), "level"),
    ]:
        raises_type(what, call, needle)
    calq.set_log(None)
    # the model is unchanged by all of it and still runs
    y = m.run({"x": x})["y"]
    if y.shape != (1, 4, 8, 8):
        fail("the model after the refused calls: output %s" % (y.shape,))
    m.close()
    raises_type("inputs of a closed model", lambda: m.inputs, "closed")

    if fails:
        print("%d failure(s)" % len(fails))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
