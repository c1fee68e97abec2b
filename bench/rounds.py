"""Interleaved benchmark rounds (bench/forward, bench/calibration).

This machine is shared and flips between a fast and a slower state from one moment to the
next, so figures from separate runs mislead. Every contender runs as a long-lived worker
process (loaded and warmed up once) speaking bench_worker.h's protocol; a round asks each worker
in turn for `runs` timings, the order alternating from round to round, and the round's figure
is each worker's median. Ratios are taken within a round (same moment), and the reported ratio
is the median of the per-round ratios. A worker is stopped (SIGSTOP) whenever it is not the one
being timed: OpenMP and onnxruntime thread pools keep spinning after a run, and would otherwise
steal the CPU from the contender being measured."""
import atexit
import os
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build_dir():
    return os.environ.get("CALQ_BUILD", os.path.join(ROOT, "build"))


def peers_env():
    env = dict(os.environ)
    env["NODE_PATH"] = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")),
                                    "node_modules")
    return env


_workers = []


def _cleanup():
    """Stopped workers would wait forever: continue and end them when the driver exits."""
    for w in _workers:
        if w.p.poll() is None:
            w.p.send_signal(signal.SIGCONT)
            w.p.terminate()


atexit.register(_cleanup)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, lambda *_: sys.exit(1))


class Worker:
    """One contender: a process that prints "ready", then answers "run K" with "times ..."."""

    def __init__(self, name, argv, env=None):
        self.name = name
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        _workers.append(self)
        line = self._line()
        if line.strip() != "ready":
            raise SystemExit(f"bench: {name} did not start (said {line.strip()!r})")
        self.p.send_signal(signal.SIGSTOP)

    def _line(self):
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            raise SystemExit(f"bench: {name_of(self)} exited (status {self.p.returncode})")
        return line

    def times(self, runs):
        self.p.send_signal(signal.SIGCONT)
        self.p.stdin.write(f"run {runs}\n")
        self.p.stdin.flush()
        line = self._line().split()
        self.p.send_signal(signal.SIGSTOP)
        if not line or line[0] != "times" or "cpu" not in line:
            raise SystemExit(f"bench: {self.name} answered {' '.join(line)!r}")
        k = line.index("cpu")
        self.cpu = [float(x) for x in line[k + 1:]]
        return [float(x) for x in line[1:k]]

    def close(self):
        self.p.send_signal(signal.SIGCONT)
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


def name_of(w):
    return w.name


def interleave(workers, rounds, runs, pairs, out=sys.stdout):
    """Runs `rounds` rounds; each round every worker gives `runs` timings (median kept).
    pairs: [(label, numerator worker, denominator worker)]. Prints one line per round and
    returns {label: median of the per-round ratios} and the per-worker medians of medians."""
    ratios = {label: [] for label, _, _ in pairs}
    meds = {w.name: [] for w in workers}
    mins = {w.name: float("inf") for w in workers}
    cpus = {w.name: [] for w in workers}
    for r in range(rounds):
        order = workers if r % 2 == 0 else list(reversed(workers))
        got = {}
        for w in order:
            t = w.times(runs)
            got[w.name] = statistics.median(t)
            meds[w.name].append(got[w.name])
            mins[w.name] = min(mins[w.name], min(t))
            cpus[w.name] += w.cpu
        parts = [f"{w.name} {got[w.name]:.3f} ms" for w in workers]
        for label, a, b in pairs:
            ratios[label].append(got[a.name] / got[b.name])
            parts.append(f"{label} {ratios[label][-1]:.3f}")
        print(f"round {r + 1}: " + ", ".join(parts), file=out, flush=True)
    # The fastest single run of each: what a contender costs when nothing disturbs it.
    print("fastest runs: " + ", ".join(f"{k} {v:.3f} ms" for k, v in mins.items()) + "; " +
          ", ".join(f"{label} {mins[a.name] / mins[b.name]:.3f}" for label, a, b in pairs), file=out, flush=True)
    # CPU time per run (all threads, spinning included): the work, whatever the machine's load.
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    print("cpu per run (median): " + ", ".join(f"{k} {v:.3f} ms" for k, v in cpu.items()) + "; " +
          ", ".join(f"{label} {cpu[a.name] / cpu[b.name]:.3f}" for label, a, b in pairs), file=out, flush=True)
    return ({k: statistics.median(v) for k, v in ratios.items()},
            {k: statistics.median(v) for k, v in meds.items()})


def dynamic_batch_copy(model, out_path):
    """A copy of model whose graph inputs and outputs have a symbolic batch dimension, so that
    onnxruntime accepts the benchmark's batch."""
    import onnx
    m = onnx.load(model)
    inits = {i.name for i in m.graph.initializer}
    for v in list(m.graph.input) + list(m.graph.output):
        dims = v.type.tensor_type.shape.dim
        if len(dims) and v.name not in inits:
            dims[0].dim_param = "N"
    del m.graph.value_info[:]
    onnx.save(m, out_path)
    return out_path
