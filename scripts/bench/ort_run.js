#!/usr/bin/env node
// Runs one ONNX model with onnxruntime-node, for scripts/bench/bench.py.
//
//   node ort_run.js --ort DIR --model M.onnx --inputs DIR [--runs R] [--warmup W]
//                   [--threads T] [--check DIR] [--atol X] [--rtol Y]
//
// --ort is the folder holding node_modules/onnxruntime-node (bench.sh installs
// it into the bench cache). Prints one JSON object on stdout:
//   {"ort_version", "load_ms", "times_ms": [...], "check": {...} | null}
// Errors go to stderr with exit status 1.
'use strict';

const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const opts = { runs: 10, warmup: 2, threads: 1, atol: 1e-4, rtol: 1e-3 };
  const numeric = new Set(['runs', 'warmup', 'threads', 'atol', 'rtol']);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    opts[key] = numeric.has(key) ? Number(argv[i + 1]) : argv[i + 1];
  }
  for (const k of ['ort', 'model', 'inputs'])
    if (!opts[k]) throw new Error(`--${k} is required`);
  return opts;
}

// ---------------------------------------------------------------------------
// A minimal TensorProto decoder: enough of protobuf's wire format to read the
// backend-test .pb files without pulling in a protobuf library.

// ONNX TensorProto.DataType -> [onnxruntime type name, typed array, bytes per element]
const DTYPES = {
  1: ['float32', Float32Array, 4],
  2: ['uint8', Uint8Array, 1],
  3: ['int8', Int8Array, 1],
  4: ['uint16', Uint16Array, 2],
  5: ['int16', Int16Array, 2],
  6: ['int32', Int32Array, 4],
  7: ['int64', BigInt64Array, 8],
  9: ['bool', Uint8Array, 1],
  11: ['float64', Float64Array, 8],
  12: ['uint32', Uint32Array, 4],
  13: ['uint64', BigUint64Array, 8],
};

class Reader {
  constructor(buf) { this.buf = buf; this.pos = 0; }
  done() { return this.pos >= this.buf.length; }
  // Varints are read as BigInt so that int64 values (and negative ones, which
  // protobuf encodes as 10-byte two's complement) survive intact.
  varint() {
    let result = 0n, shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) throw new Error('truncated varint');
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return BigInt.asIntN(64, result);
      shift += 7n;
    }
  }
  bytes(n) {
    if (this.pos + n > this.buf.length) throw new Error('truncated field');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  lengthDelimited() { return this.bytes(Number(this.varint())); }
  skip(wireType) {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.bytes(8);
    else if (wireType === 2) this.lengthDelimited();
    else if (wireType === 5) this.bytes(4);
    else throw new Error(`unsupported wire type ${wireType}`);
  }
}

// Repeated scalar fields may come packed (wire type 2) or one per tag.
function readRepeated(r, wireType, scalarWire, readOne, out) {
  if (wireType === 2) {
    const sub = new Reader(r.lengthDelimited());
    while (!sub.done()) out.push(readOne(sub));
  } else if (wireType === scalarWire) {
    out.push(readOne(r));
  } else {
    r.skip(wireType);
  }
}

const readVarint = (r) => r.varint();
const readFloat = (r) => { const b = r.bytes(4); return b.readFloatLE(0); };
const readDouble = (r) => { const b = r.bytes(8); return b.readDoubleLE(0); };

function decodeTensorProto(buf) {
  const r = new Reader(buf);
  const t = { dims: [], dataType: 0, name: '', raw: null, floats: [], int32s: [], int64s: [], doubles: [] };
  while (!r.done()) {
    const key = Number(r.varint());
    const field = key >>> 3, wire = key & 7;
    switch (field) {
      case 1: readRepeated(r, wire, 0, readVarint, t.dims); break;
      case 2: t.dataType = Number(r.varint()); break;
      case 4: readRepeated(r, wire, 5, readFloat, t.floats); break;
      case 5: readRepeated(r, wire, 0, readVarint, t.int32s); break;
      case 7: readRepeated(r, wire, 0, readVarint, t.int64s); break;
      case 8: t.name = r.lengthDelimited().toString('utf8'); break;
      case 9: t.raw = r.lengthDelimited(); break;
      case 10: readRepeated(r, wire, 1, readDouble, t.doubles); break;
      default: r.skip(wire);
    }
  }
  return t;
}

// Builds an onnxruntime Tensor from a decoded TensorProto.
function toOrtTensor(ort, t, file) {
  const info = DTYPES[t.dataType];
  if (!info) throw new Error(`${file}: unsupported data_type ${t.dataType}`);
  const [typeName, Arr, size] = info;
  const dims = t.dims.map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.raw) {
    if (t.raw.length !== count * size)
      throw new Error(`${file}: raw_data has ${t.raw.length} bytes, expected ${count * size}`);
    // Copy: the slice of the file buffer need not be aligned for the typed array.
    data = new Arr(count);
    new Uint8Array(data.buffer).set(t.raw);
  } else {
    // Typed fields: float_data for float, double_data for double, int64_data
    // for int64, uint64_data (not needed here) and int32_data for every
    // narrower integer type and bool.
    let src;
    if (t.dataType === 1) src = t.floats;
    else if (t.dataType === 11) src = t.doubles;
    else if (t.dataType === 7) src = t.int64s;
    else if (t.dataType === 13) src = t.int64s.map((v) => BigInt.asUintN(64, v));
    else src = t.int32s.map(Number);
    if (src.length !== count)
      throw new Error(`${file}: has ${src.length} elements, expected ${count}`);
    data = Arr.from(src);
  }
  return new ort.Tensor(typeName, data, dims);
}

function readTensorFile(ort, file) {
  return toOrtTensor(ort, decodeTensorProto(fs.readFileSync(file)), file);
}

// The same closeness test as kiln-run --check: |out - ref| <= atol + rtol*|ref|.
function compare(out, ref, atol, rtol) {
  if (out.dims.join('x') !== ref.dims.join('x'))
    return { ok: false, detail: `shape ${out.dims.join('x')} vs reference ${ref.dims.join('x')}` };
  let maxErr = 0, bad = 0;
  for (let i = 0; i < ref.data.length; ++i) {
    const o = Number(out.data[i]), e = Number(ref.data[i]);
    const err = Math.abs(o - e);
    if (!(err <= atol + rtol * Math.abs(e))) ++bad;  // also catches NaN
    if (err > maxErr || Number.isNaN(err)) maxErr = err;
  }
  return { ok: bad === 0, detail: `max abs error ${maxErr.toExponential(2)}, ${bad} elements out of tolerance` };
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ort = require(path.join(path.resolve(opts.ort), 'node_modules', 'onnxruntime-node'));

  const t0 = nowMs();
  // One session per process: bench.py starts this script once per round, so
  // each round pays the load like a Kiln round pays its compile.
  const session = await ort.InferenceSession.create(opts.model, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const loadMs = nowMs() - t0;

  // input_J.pb is graph input J, as in the ONNX backend-test layout.
  const feeds = {};
  session.inputNames.forEach((name, j) => {
    feeds[name] = readTensorFile(ort, path.join(opts.inputs, `input_${j}.pb`));
  });

  let check = null;
  if (opts.check) {
    const results = await session.run(feeds);
    check = { ok: true, outputs: [] };
    session.outputNames.forEach((name, k) => {
      const ref = readTensorFile(ort, path.join(opts.check, `output_${k}.pb`));
      const c = compare(results[name], ref, opts.atol, opts.rtol);
      check.outputs.push(`${name}: ${c.detail}`);
      check.ok = check.ok && c.ok;
    });
  }

  for (let w = 0; w < opts.warmup; ++w) await session.run(feeds);
  const times = [];
  for (let i = 0; i < opts.runs; ++i) {
    const s = nowMs();
    await session.run(feeds);
    times.push(nowMs() - s);
  }

  const version = (ort.env && ort.env.versions && ort.env.versions.node) || 'unknown';
  process.stdout.write(JSON.stringify({ ort_version: version, load_ms: loadMs, times_ms: times, check }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_run: error: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
