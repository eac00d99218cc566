#!/usr/bin/env node
// The oracle's runner: runs one ONNX model in ONNX Runtime and prints, as one
// JSON object, the element type and shape of every graph output:
//   {"NAME": {"type": 1, "shape": [2, 3, 224, 224]}, ...}
// (a bool of one element also gets "value": 0 or 1)
// tests/shape_oracle.py turns every intermediate value into a graph output
// before calling this, so "every output" means "every value".
//
// usage: node tests/ort_shapes.js MODEL.onnx INPUTS.json
//
// INPUTS.json is a list of input specs as models/corpus.py writes them in
// corpus.json: {"name", "dtype" (numpy name), "shape", optional "low"/"high"
// (values drawn uniformly from [low, high); ints must stay in range, e.g.
// token ids below the vocabulary size), optional "values" (exact, flat)}.
// Values come from a fixed-seed generator so that data-dependent sizes
// (NonZero, detection boxes) are the same from run to run.
//
// Exit 0 with the JSON; 2 on bad usage; 1 when ORT cannot load or run the
// model (its message on stderr, which the caller reports as a failure).
'use strict';
const fs = require('fs');
const path = require('path');

// onnxruntime-node is installed in the repository root (npm install there).
let ort;
try {
  ort = require(path.join(__dirname, '..', 'node_modules', 'onnxruntime-node'));
} catch (e) {
  try { ort = require('onnxruntime-node'); } catch (e2) {
    process.stderr.write('ort_shapes.js: cannot load onnxruntime-node: ' + e2.message + '\n');
    process.exit(77);
  }
}

// ORT's tensor type names -> ONNX TensorProto elem_type numbers.
const ELEM = {float32: 1, uint8: 2, int8: 3, uint16: 4, int16: 5, int32: 6, int64: 7,
  string: 8, bool: 9, float16: 10, float64: 11, uint32: 12, uint64: 13, bfloat16: 16};
// numpy dtype names (corpus.json) -> [ORT type, typed array]
const ARRAY = {float32: ['float32', Float32Array], float64: ['float64', Float64Array],
  int64: ['int64', BigInt64Array], int32: ['int32', Int32Array], int8: ['int8', Int8Array],
  uint8: ['uint8', Uint8Array], bool: ['bool', Uint8Array]};

// mulberry32: small, fast, seedable; Math.random cannot be seeded.
function rng(seed) {
  return function () {
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function makeTensor(spec, rand) {
  const kind = ARRAY[spec.dtype];
  if (!kind) throw new Error(`input ${spec.name}: unsupported dtype ${spec.dtype}`);
  const [type, Arr] = kind;
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const data = new Arr(n);
  const isInt = type !== 'float32' && type !== 'float64';
  const low = spec.low !== undefined ? spec.low : (type === 'bool' ? 0 : isInt ? 0 : -1);
  const high = spec.high !== undefined ? spec.high : (type === 'bool' ? 2 : isInt ? 10 : 1);
  for (let i = 0; i < n; i++) {
    let v = spec.values ? spec.values[i % spec.values.length] : low + rand() * (high - low);
    if (isInt && !spec.values) v = Math.floor(v);
    if (type === 'bool') v = v ? 1 : 0;
    data[i] = type === 'int64' ? BigInt(v) : v;
  }
  return new ort.Tensor(type, data, spec.shape);
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length !== 2) {
    process.stderr.write('usage: node ort_shapes.js MODEL.onnx INPUTS.json\n');
    process.exit(2);
  }
  const specs = JSON.parse(fs.readFileSync(args[1], 'utf8'));
  const rand = rng(1234);
  const feeds = {};
  for (const s of specs) feeds[s.name] = makeTensor(s, rand);
  // Optimizations off: the graph runs as written (no folding or fusion
  // between what we asked for and what ORT computes); 2 threads like CI.
  const session = await ort.InferenceSession.create(args[0], {
    graphOptimizationLevel: 'disabled', intraOpNumThreads: 2, interOpNumThreads: 1,
  });
  const results = await session.run(feeds);
  const out = {};
  for (const name of session.outputNames) {
    const t = results[name];
    if (t && t.dims !== undefined && t.type !== undefined) {
      out[name] = {type: ELEM[t.type] !== undefined ? ELEM[t.type] : t.type, shape: Array.from(t.dims)};
      // a bool of one element (an If's cond): its value, so that the caller
      // can splice in the branch ORT took (tests/shape_oracle.py)
      if (t.type === 'bool' && t.size === 1) out[name].value = t.data[0] ? 1 : 0;
    } else {
      // sequences, maps, optionals: not tensors; say what came back
      out[name] = {type: Array.isArray(t) ? 'sequence' : typeof t, shape: null};
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write('ort_shapes.js: ' + (e && e.message ? e.message : e) + '\n');
  process.exit(1);
});
