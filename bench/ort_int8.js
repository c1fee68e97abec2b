// onnxruntime-node timing for bench/ort-int8: node ort_int8.js THREADS ROUNDS RUNS INPUT.npy NAME=MODEL...
// One session per model (all graph optimisations, THREADS intra-op threads), each warmed up; then
// ROUNDS rounds, each running every model RUNS times in turn (interleaved, so load from others on
// the machine falls on all of them alike). Prints per model the median over all runs of its
// wall-clock milliseconds, and each round's medians, as JSON on the last line.
'use strict';
const path = require('path');
const ort = require('onnxruntime-node');
const npy = require(path.join(__dirname, '..', 'tests', 'peers', 'npy.js'));

const median = a => { const s = [...a].sort((x, y) => x - y); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };

async function main() {
  const [threads, rounds, runs, input, ...models] = process.argv.slice(2);
  const a = npy.read(input);
  const sessions = [];
  for (const spec of models) {
    const [name, file] = spec.split(/=(.*)/s);
    const s = await ort.InferenceSession.create(file, {
      intraOpNumThreads: Number(threads), interOpNumThreads: 1, logSeverityLevel: 3, graphOptimizationLevel: 'all',
    });
    const feeds = {[s.inputNames[0]]: new ort.Tensor(a.type, a.data, a.shape)};
    for (let r = 0; r < 5; r++) await s.run(feeds);
    sessions.push({name, s, feeds, all: [], rounds: []});
  }
  for (let r = 0; r < Number(rounds); r++)
    for (const x of sessions) {
      const t = [];
      for (let k = 0; k < Number(runs); k++) {
        const t0 = process.hrtime.bigint();
        await x.s.run(x.feeds);
        t.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      x.all.push(...t);
      x.rounds.push(median(t));
    }
  const out = {};
  for (const x of sessions) out[x.name] = {median: median(x.all), rounds: x.rounds};
  console.log(JSON.stringify(out));
}
main().catch(e => { console.error('ort_int8: ' + e.message); process.exit(1); });
