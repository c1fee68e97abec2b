"""Helpers the Python peer tests share: failure collection, cosine, running a command, and where
onnxruntime-node lives. Each script imports this module from its own folder."""
import os
import subprocess

import numpy as np

FAILS = []


def fail(msg):
    """Record a failed check (printed at once; the script exits 1 if any)."""
    print("FAIL: " + msg, flush=True)
    FAILS.append(msg)


def cosine(a, b):
    """Cosine of two arrays as flat float64 vectors; 1 for two zero vectors."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 1.0 if na == nb == 0 else float(a @ b / (na * nb))


def run(cmd, **kw):
    """Run cmd; raise with the tail of its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[:3]), r.returncode, (r.stderr + r.stdout)[-1500:]))
    return r


def node_path():
    """The node_modules folder holding onnxruntime-node (CALQ_PEERS_DIR, else ~/.cache/calq-peers)."""
    return os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")), "node_modules")


def have_ort():
    return os.path.isdir(os.path.join(node_path(), "onnxruntime-node"))
