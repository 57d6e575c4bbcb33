#!/usr/bin/env node
// Writes reference outputs for one ONNX model with onnxruntime-node, for
// scripts/models/export_models.py.
//
//   node ort_reference.js --ort DIR --model M.onnx --inputs DIR [--outputs DIR]
//
// Reads DIR/input_J.pb (graph input J, ONNX backend-test layout), runs the
// model once on one thread and writes output_K.pb (graph output K) as ONNX
// TensorProto files with raw_data into --outputs (default: the inputs folder).
// --ort is the folder holding node_modules/onnxruntime-node (scripts/bench.sh
// installs it into the bench cache). Prints one line per output on stdout;
// errors go to stderr with exit status 1.
//
// scripts/bench/ort_run.js only times and checks, it cannot write outputs, and
// it runs its main() when loaded, so its decoder cannot be required from here.
// The decoder below follows the same approach but handles only raw_data, which
// is what export_models.py (and onnx.numpy_helper) writes.
'use strict';

const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    opts[argv[i].replace(/^--/, '')] = argv[i + 1];
  }
  for (const k of ['ort', 'model', 'inputs'])
    if (!opts[k]) throw new Error(`--${k} is required`);
  opts.outputs = opts.outputs || opts.inputs;
  return opts;
}

// ONNX TensorProto.DataType <-> onnxruntime type name and typed array.
const DTYPES = {
  1: ['float32', Float32Array],
  2: ['uint8', Uint8Array],
  3: ['int8', Int8Array],
  4: ['uint16', Uint16Array],
  5: ['int16', Int16Array],
  6: ['int32', Int32Array],
  7: ['int64', BigInt64Array],
  9: ['bool', Uint8Array],
  11: ['float64', Float64Array],
  12: ['uint32', Uint32Array],
  13: ['uint64', BigUint64Array],
};
const ONNX_TYPE = Object.fromEntries(Object.entries(DTYPES).map(([code, [name]]) => [name, Number(code)]));

// ---------------------------------------------------------------------------
// Just enough of protobuf's wire format for TensorProto's dims, data_type,
// name and raw_data (fields 1, 2, 8, 9).

function readVarint(buf, pos) {
  // BigInt, so that 64-bit dims cannot lose precision.
  let result = 0n, shift = 0n;
  for (;;) {
    if (pos.at >= buf.length) throw new Error('truncated varint');
    const b = buf[pos.at++];
    result |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return result;
    shift += 7n;
  }
}

function decodeTensorProto(buf, file) {
  const pos = { at: 0 };
  const t = { dims: [], dataType: 0, raw: null };
  const bytes = () => {
    const n = Number(readVarint(buf, pos));
    if (pos.at + n > buf.length) throw new Error(`${file}: truncated field`);
    pos.at += n;
    return buf.subarray(pos.at - n, pos.at);
  };
  while (pos.at < buf.length) {
    const key = Number(readVarint(buf, pos));
    const field = key >>> 3, wire = key & 7;
    if (field === 1 && wire === 0) t.dims.push(Number(readVarint(buf, pos)));
    else if (field === 1 && wire === 2) {
      // Packed dims.
      const sub = bytes(), subPos = { at: 0 };
      while (subPos.at < sub.length) t.dims.push(Number(readVarint(sub, subPos)));
    } else if (field === 2 && wire === 0) t.dataType = Number(readVarint(buf, pos));
    else if (field === 9 && wire === 2) t.raw = bytes();
    else if (wire === 0) readVarint(buf, pos);
    else if (wire === 1) pos.at += 8;
    else if (wire === 2) bytes();
    else if (wire === 5) pos.at += 4;
    else throw new Error(`${file}: unsupported wire type ${wire}`);
  }
  return t;
}

function readTensorFile(ort, file) {
  const t = decodeTensorProto(fs.readFileSync(file), file);
  const info = DTYPES[t.dataType];
  if (!info) throw new Error(`${file}: unsupported data_type ${t.dataType}`);
  if (!t.raw) throw new Error(`${file}: no raw_data (typed *_data fields are not supported here)`);
  const [typeName, Arr] = info;
  const count = t.dims.reduce((a, b) => a * b, 1);
  if (t.raw.length !== count * Arr.BYTES_PER_ELEMENT)
    throw new Error(`${file}: raw_data has ${t.raw.length} bytes, expected ${count * Arr.BYTES_PER_ELEMENT}`);
  // Copy: the slice of the file buffer need not be aligned for the typed array.
  const data = new Arr(count);
  new Uint8Array(data.buffer).set(t.raw);
  return new ort.Tensor(typeName, data, t.dims);
}

// ---------------------------------------------------------------------------
// Encoding: dims as one varint per tag (the proto2 default, which every
// protobuf parser accepts), then data_type, name and little-endian raw_data,
// as onnx.numpy_helper.from_array writes them.

function varint(value) {
  let v = BigInt.asUintN(64, BigInt(value));
  const out = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return Buffer.from(out);
}

const tag = (field, wire) => varint((field << 3) | wire);
const lengthDelimited = (field, payload) => Buffer.concat([tag(field, 2), varint(payload.length), payload]);

function encodeTensorProto(tensor, name) {
  const code = ONNX_TYPE[tensor.type];
  if (!code) throw new Error(`output ${name}: unsupported type ${tensor.type}`);
  const d = tensor.data;
  const parts = tensor.dims.map((n) => Buffer.concat([tag(1, 0), varint(n)]));
  parts.push(tag(2, 0), varint(code));
  parts.push(lengthDelimited(8, Buffer.from(name, 'utf8')));
  // x86 and arm64 are little-endian, like raw_data, so the bytes go as they are.
  parts.push(lengthDelimited(9, Buffer.from(d.buffer, d.byteOffset, d.byteLength)));
  return Buffer.concat(parts);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ort = require(path.join(path.resolve(opts.ort), 'node_modules', 'onnxruntime-node'));

  // One thread and sequential execution: the reference should not depend on
  // how many cores the machine that wrote it had.
  const session = await ort.InferenceSession.create(opts.model, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });

  const feeds = {};
  session.inputNames.forEach((name, j) => {
    feeds[name] = readTensorFile(ort, path.join(opts.inputs, `input_${j}.pb`));
  });
  const results = await session.run(feeds);

  fs.mkdirSync(opts.outputs, { recursive: true });
  session.outputNames.forEach((name, k) => {
    const t = results[name];
    const file = path.join(opts.outputs, `output_${k}.pb`);
    fs.writeFileSync(file, encodeTensorProto(t, name));
    process.stdout.write(`${file}: ${name} ${t.type} ${t.dims.join('x')}\n`);
  });
}

main().catch((e) => {
  process.stderr.write(`ort_reference: error: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
