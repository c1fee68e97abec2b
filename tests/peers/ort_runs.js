// Runs an ONNX model in onnxruntime-node on several inputs in one session (one model load):
//   node ort_runs.js MODEL OUT_DIR INPUT_NAME IN0.npy [IN1.npy ...] [--threads N]
// Writes output o of input k as OUT_DIR/<k>/<o>.npy (names sanitised as ort_run.js does).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const npy = require('./npy.js');

async function main() {
  const args = process.argv.slice(2);
  let threads = 1;
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--threads') threads = Number(args[++i]);
    else pos.push(args[i]);
  }
  const [model, outDir, inputName, ...files] = pos;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, logSeverityLevel: 3,
  });
  for (let k = 0; k < files.length; k++) {
    const a = npy.read(files[k]);
    const results = await session.run({[inputName]: new ort.Tensor(a.type, a.data, a.shape)});
    const d = path.join(outDir, String(k));
    fs.mkdirSync(d, {recursive: true});
    for (const name of session.outputNames) {
      const t = results[name];
      npy.write(path.join(d, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'), t.type, t.dims, t.data);
    }
  }
}
main().catch(e => { console.error('ort_runs: ' + e.message); process.exit(1); });
