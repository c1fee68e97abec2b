// onnxruntime half of bench/forward: node ort_forward.js MODEL INPUT_DIR THREADS RUNS
// Times session.run on the inputs calq saved (INPUT_DIR/<name>.npy); load and 3 warm-ups excluded.
'use strict';
const path = require('path');
const ort = require('onnxruntime-node');
const npy = require(path.join(__dirname, '..', 'tests', 'peers', 'npy.js'));

async function main() {
  const [model, dir, threads, runs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, logSeverityLevel: 3,
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const a = npy.read(path.join(dir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'));
    feeds[name] = new ort.Tensor(a.type, a.data, a.shape);
  }
  const times = [];
  for (let r = -3; r < Number(runs); r++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    const t1 = process.hrtime.bigint();
    if (r >= 0) times.push(Number(t1 - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const med = times[Math.floor(times.length / 2)];
  console.log(`onnxruntime ${ort.env.versions ? ort.env.versions.common : ''}: median ${med.toFixed(3)} ms over ${runs} runs (threads ${threads})`);
  console.log(`ort_ms ${med.toFixed(4)}`);
}
main().catch(e => { console.error('ort_forward: ' + e.message); process.exit(1); });
