// onnxruntime worker for bench/forward: node ort_forward.js MODEL INPUT_DIR THREADS
// Loads MODEL into an onnxruntime-node session (all graph optimisations, THREADS intra-op
// threads), feeds the inputs calq's worker saved (INPUT_DIR/<name>.npy), warms up three runs,
// then answers bench_worker.h's protocol on stdin: "run K" -> "times t1 ... tK cpu c1 ... cK"
// (wall-clock and process CPU milliseconds).
'use strict';
const path = require('path');
const readline = require('readline');
const ort = require('onnxruntime-node');
const npy = require(path.join(__dirname, '..', 'tests', 'peers', 'npy.js'));

async function main() {
  const [model, dir, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, logSeverityLevel: 3,
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const a = npy.read(path.join(dir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'));
    feeds[name] = new ort.Tensor(a.type, a.data, a.shape);
  }
  for (let r = 0; r < 3; r++) await session.run(feeds);
  console.log('ready');
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (line.startsWith('quit')) break;
    const m = /^run (\d+)/.exec(line);
    if (!m) throw new Error('unknown command ' + line);
    const times = [], cpu = [];
    for (let r = 0; r < Number(m[1]); r++) {
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      const c = process.cpuUsage(c0);
      cpu.push((c.user + c.system) / 1e3);
    }
    console.log('times ' + times.map(t => t.toFixed(4)).join(' ') + ' cpu ' + cpu.map(t => t.toFixed(4)).join(' '));
  }
  rl.close();
}
main().catch(e => { console.error('ort_forward: ' + e.message); process.exit(1); });
