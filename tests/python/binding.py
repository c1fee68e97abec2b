#!/usr/bin/python3
"""The Python binding (python/calq, docs/python.md; issue 10, item 5), on the shared UltraFace:

1. the example of docs/python.md, run as it stands: calibrates from numpy arrays, saves, runs
   the fake-quant model, and catches the calq.Error of a batch_num larger than the data;
2. its record, config and AMCT fake-quant model equal, byte for byte, what `calq calibration
   --npy` writes from the same batches saved as .npy files; Model.run equals `calq run`;
3. the error cases: batch_num too large (names batch_num, nothing written), a batch with a wrong
   input name or shape, an exception inside the generator (re-raised as itself);
4. memory flat in the number of batches: peak RSS (VmHWM, one process per run) of a
   calibration streaming 480 batches from a generator vs 48 (a small Conv model made with the
   onnx package), and that a materialised list of them would have been far larger.

Usage: binding.py CALQ_CLI SHARED_DIR  (CALQ_LIBRARY and PYTHONPATH set by ctest)"""
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed (Debian: python3-numpy)")
    sys.exit(77)

CLI, SHARED = sys.argv[1], os.path.abspath(sys.argv[2])
HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "python.md")
MODEL = os.path.join(SHARED, "models/ultraface/version-slim-320.onnx")
fails = []


def fail(msg):
    print("FAIL:", msg)
    fails.append(msg)


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def doc_example():
    text = open(DOC).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    if not blocks:
        raise SystemExit("FAIL: docs/python.md has no python block")
    return blocks[0]


def memory_child(n_batches, materialise):
    """Runs in a fresh interpreter: calibrates a small Conv model on n_batches generated batches
    and prints its peak RSS in KiB."""
    import onnx
    from onnx import TensorProto, helper

    import calq

    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("Relu", ["c"], ["y"], name="relu")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 96, 96])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 96, 96])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    path = os.path.join(os.environ["TMPDIR"], "conv.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    m = calq.load(path)

    def gen():
        for b in range(n_batches):  # a new 108 KiB array each time
            yield {"x": np.random.default_rng(b).standard_normal((1, 3, 96, 96)).astype(np.float32)}

    batches = list(gen()) if materialise else gen()
    # the activation cache holds at most cache_mb in memory, the rest in its file: 4 MiB is below
    # the 48 batches' 5 MiB, so both runs spill and memory must not grow with the batches
    calq.calibrate(m, batches, os.path.join(os.environ["TMPDIR"], "mem", "conv"), batch_num=n_batches,
                   save_type="None", cache_mb=4)
    # the peak RSS of this process image: VmHWM. ru_maxrss would do in a process started afresh,
    # but Linux keeps it across fork + exec, so here it would start at the test runner's own peak.
    with open("/proc/self/status") as f:
        hwm = [int(line.split()[1]) for line in f if line.startswith("VmHWM:")]
    print(hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def peak_rss(tmp, n, materialise=False):
    env = dict(os.environ, TMPDIR=tmp)
    r = subprocess.run([sys.executable, __file__, "--memory-child", str(n), "1" if materialise else "0"],
                       env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail("memory run of %d batches: %s" % (n, r.stderr[-2000:]))
        return None
    return int(r.stdout.split()[-1])


def main():
    if not os.path.exists(MODEL):
        print("SKIP: %s is missing" % MODEL)
        return 77
    try:
        import cv2  # noqa: F401 (the example's image library)
    except ImportError:
        print("SKIP: OpenCV for Python is not installed (Debian: python3-opencv)")
        return 77
    import calq

    tmp = tempfile.mkdtemp(prefix="calq_python.")
    try:
        os.chdir(tmp)
        os.environ["CALQ_SHARED"] = SHARED
        os.environ["TMPDIR"] = tmp

        # ---- 1. the documented example, as it stands ----
        ns = {"__name__": "calq_example"}
        exec(compile(doc_example(), "docs/python.md", "exec"), ns)
        res = ns["result"]
        for f in ("out/ultraface_record.txt", "out/ultraface_config.json", "out/ultraface_fake_quant_model.onnx",
                  "out/ultraface_deploy_model.onnx", "out/ultraface_qdq.onnx", "out/ultraface_qoperator.onnx"):
            if not os.path.getsize(f) > 0:
                fail("the example did not write " + f)
        nkeys = sum(1 for line in open(res.record) if line.startswith("  key: "))
        if nkeys != 42:
            fail("the record lists %d layers, not UltraFace's 42" % nkeys)
        s, fs = ns["scores"], ns["float_scores"]
        if s.shape != (1, 4420, 2) or s.dtype != np.float32:
            fail("fake-quant scores are %s %s" % (s.shape, s.dtype))
        cos = float(np.dot(s.ravel(), fs.ravel()) / np.linalg.norm(s) / np.linalg.norm(fs))
        if not (cos > 0.99 and fs[0, :, 1].max() > 0.9 and abs(s[0, :, 1].max() - fs[0, :, 1].max()) < 0.05):
            fail("fake-quant vs float scores: cosine %.5f, best face %.4f vs %.4f" % (
                cos, s[0, :, 1].max(), fs[0, :, 1].max()))
        if os.path.exists("out/too_few_record.txt") or os.path.exists("out/too_few_config.json"):
            fail("a failed calibration wrote files")
        print("example: record of %d layers, fake-quant vs float scores cosine %.5f" % (nkeys, cos))

        # ---- 2. byte for byte against the CLI on the same batches ----
        os.makedirs("npy")
        for k, b in enumerate(ns["batches"](ns["PHOTOS"][:8])):
            np.save("npy/%02d.npy" % k, b["input"])
        r = subprocess.run([CLI, "calibration", "--model", MODEL, "--npy", "npy", "--input_shape", "input:1,3,240,320",
                            "--batch_num", "8", "--save_path", "cli/ultraface", "--format", "ascend",
                            "--save_type", "Fakequant"], capture_output=True, text=True)
        if r.returncode != 0:
            fail("calq calibration: " + r.stderr[-2000:])
        else:
            for suffix in ("_record.txt", "_config.json", "_fake_quant_model.onnx"):
                if not same_file("out/ultraface" + suffix, "cli/ultraface" + suffix):
                    fail("ultraface%s differs between calq.calibrate and calq calibration" % suffix)
            print("CLI: record, config and fake-quant model byte-identical")
        # save from Python = calq save
        calq.save(ns["model"], "cli/ultraface_record.txt", "py_save/uf", config="cli/ultraface_config.json",
                  formats=["qdq"])
        os.makedirs("cli_save")
        r = subprocess.run([CLI, "save", "--model", MODEL, "--record", "cli/ultraface_record.txt", "--config",
                            "cli/ultraface_config.json", "--save_path", "cli_save/uf", "--format", "qdq"],
                           capture_output=True, text=True)
        if r.returncode != 0 or not same_file("py_save/uf_qdq.onnx", "cli_save/uf_qdq.onnx"):
            fail("calq.save vs calq save (qdq): %s" % r.stderr[-1000:])
        # reduce_range = --reduce-range (7-bit weights), a different file
        calq.save(ns["model"], "cli/ultraface_record.txt", "py_save/rr", config="cli/ultraface_config.json",
                  formats=["qdq"], reduce_range=True)
        r = subprocess.run([CLI, "save", "--model", MODEL, "--record", "cli/ultraface_record.txt", "--config",
                            "cli/ultraface_config.json", "--save_path", "cli_save/rr", "--format", "qdq",
                            "--reduce-range"], capture_output=True, text=True)
        if r.returncode != 0 or not same_file("py_save/rr_qdq.onnx", "cli_save/rr_qdq.onnx"):
            fail("calq.save(reduce_range=True) vs calq save --reduce-range: %s" % r.stderr[-1000:])
        if same_file("py_save/rr_qdq.onnx", "py_save/uf_qdq.onnx"):
            fail("reduce_range=True wrote the 8-bit file")
        try:
            calq.save(ns["model"], "cli/ultraface_record.txt", "py_save/x", formats=["ascend"], reduce_range=True)
            fail("reduce_range with formats ['ascend'] was accepted")
        except calq.Error as e:
            if "qdq and qoperator" not in str(e):
                fail("reduce_range with ascend: %s" % e)
        # Model.run = calq run
        r = subprocess.run([CLI, "run", "out/ultraface_fake_quant_model.onnx", "--input", "input=npy/00.npy",
                            "--output-dir", "run"], capture_output=True, text=True)
        got = ns["fake"].run({"input": np.load("npy/00.npy")})
        if r.returncode != 0:
            fail("calq run: " + r.stderr[-1000:])
        else:
            for name, a in got.items():
                want = np.load("run/%s.npy" % name)
                if a.shape != want.shape or a.tobytes() != want.tobytes():
                    fail("Model.run output %s differs from calq run" % name)

        # calq.compare = calq compare --json (same figures), with --sensitivity
        r = subprocess.run([CLI, "compare", "--model", MODEL, "--quantized", "cli/ultraface_fake_quant_model.onnx",
                            "--npy", "npy", "--input_shape", "input:1,3,240,320", "--batch_num", "3",
                            "--sensitivity", "--json", "cmp.json"], capture_output=True, text=True)
        fake_cli = calq.load("cli/ultraface_fake_quant_model.onnx", input_shape={"input": (1, 3, 240, 320)})
        rep = calq.compare(ns["model"], fake_cli, ({"input": np.load("npy/%02d.npy" % k)} for k in range(8)),
                           batch_num=3, sensitivity=True)
        if r.returncode != 0:
            fail("calq compare: " + r.stderr[-1000:])
        else:
            want = json.load(open("cmp.json"))
            for k in ("model", "quantized", "seconds"):
                want.pop(k, None)
                rep.pop(k, None)
            if rep != want:
                fail("calq.compare's report differs from calq compare --json")
            worst = min(rep["layers"], key=lambda l: l["sensitivity_cosine"])
            print("calq.compare = calq compare --json (%d layers; worst at the outputs %s %.5f)" % (
                len(rep["layers"]), worst["name"], worst["sensitivity_cosine"]))
        try:
            calq.compare(ns["model"], fake_cli, [{"input": np.load("npy/00.npy")}], batch_num=2)
            fail("calq.compare with batch_num 2 on 1 batch did not raise")
        except calq.Error as e:
            if "batch_num is 2" not in e.message:
                fail("calq.compare batch_num error: %s" % e)

        # ---- 3. errors ----
        m = ns["model"]
        try:
            calq.calibrate(m, ns["batches"](ns["PHOTOS"][:3]), "err/uf", batch_num=4)
            fail("batch_num 4 on 3 batches did not raise")
        except calq.Error as e:
            if "batch_num is 4" not in e.message or e.status_name != "BAD_PARAMETERS":
                fail("batch_num error: %s" % e)
        if os.path.exists("err") and os.listdir("err"):
            fail("the failed calibration left %s" % os.listdir("err"))
        x = np.zeros((1, 3, 240, 320), np.float32)
        for bad, want in (({"image": x}, "the batch misses 'input'"),
                          ({"input": x[:, :, :100]}, "input 'input' is 1x3x100x320 float32 but the model takes")):
            try:
                calq.calibrate(m, [bad], "err/uf", batch_num=1)
                fail("a bad batch did not raise: %s" % want)
            except calq.Error as e:
                if want not in e.message:
                    fail("bad batch: %r not in %r" % (want, e.message))

        def broken():
            yield {"input": x}
            raise KeyError("photo 2")

        try:
            calq.calibrate(m, broken(), "err/uf", batch_num=2)
            fail("the generator's exception was lost")
        except KeyError:
            pass
        try:
            m.run({"input": x.astype(np.int32)})
            fail("run with int32 for a float input did not raise")
        except calq.Error as e:
            if "takes float32, not int32" not in e.message:
                fail("run dtype error: %s" % e)
        try:
            calq.load("missing.onnx")
            fail("loading a missing file did not raise")
        except calq.Error as e:
            if e.status_name != "IO" or "missing.onnx" not in e.message:
                fail("load error: %s (%s)" % (e, e.status_name))

        # ---- 4. memory flat in the number of batches ----
        # Under AddressSanitizer (the ASan pass preloads libasan) freed memory sits in ASan's
        # quarantine, so the peak RSS says nothing about what calq keeps: measured in the
        # release pass only.
        sanitized = "libasan" in os.environ.get("LD_PRELOAD", "")
        if sanitized:
            print("peak RSS: not measured under AddressSanitizer (its quarantine holds freed memory)")
        small = big = listed = None
        if not sanitized:
            small, big = peak_rss(tmp, 48), peak_rss(tmp, 480)
            listed = peak_rss(tmp, 480, materialise=True)
        if small and big and listed:
            mib = lambda k: k / 1024.0  # noqa: E731
            print("peak RSS: 48 batches %.1f MiB, 480 batches %.1f MiB (a list of the 480: %.1f MiB)" % (
                mib(small), mib(big), mib(listed)))
            if big - small > 12 * 1024:  # 432 more batches are 46 MiB
                fail("memory grows with the batches: %.1f MiB for 48, %.1f MiB for 480" % (mib(small), mib(big)))
            if listed - big < 35 * 1024:
                fail("the materialised list did not cost its 51 MiB (%.1f vs %.1f MiB): the check cannot fail" % (
                    mib(listed), mib(big)))
    finally:
        os.chdir("/")
        shutil.rmtree(tmp, ignore_errors=True)
    print("binding: %s" % ("%d failure(s)" % len(fails) if fails else "all passed"))
    return 1 if fails else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--memory-child":
        memory_child(int(sys.argv[2]), sys.argv[3] == "1")
        sys.exit(0)
    sys.exit(main())
