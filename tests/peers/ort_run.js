// Runs an ONNX model in onnxruntime-node: node ort_run.js MODEL OUT_DIR NAME=IN.npy [...] [--threads N]
// Writes every output as OUT_DIR/<name>.npy (names sanitised like calq's: non [A-Za-z0-9._-] -> '_').
'use strict';
const path = require('path');
const ort = require('onnxruntime-node');
const npy = require('./npy.js');

async function main() {
  const args = process.argv.slice(2);
  let threads = 1;
  const feeds = {};
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--threads') threads = Number(args[++i]);
    else if (args[i].includes('=')) {
      const [name, file] = args[i].split(/=(.*)/s);
      const a = npy.read(file);
      feeds[name] = new ort.Tensor(a.type, a.data, a.shape);
    } else pos.push(args[i]);
  }
  const [model, outDir] = pos;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, logSeverityLevel: 3,
  });
  const results = await session.run(feeds);
  for (const name of session.outputNames) {
    const t = results[name];
    const safe = name.replace(/[^A-Za-z0-9._-]/g, '_');
    npy.write(path.join(outDir, safe + '.npy'), t.type, t.dims, t.data);
  }
}
main().catch(e => { console.error('ort_run: ' + e.message); process.exit(1); });
