#!/usr/bin/env node
// ONNX Runtime's side of scripts/bench/shapes_bench.py: what a user pays
// when input shapes vary. One session per process, as a server would have.
//
//   node ort_shapes.js --ort DIR --model M.onnx --mode lengths --lengths 1,2,... \
//                      [--width 256] [--runs 5] [--threads 1]
//     input [1, L, width] float32 of value 0.01 * ((i % 13) - 6), per length:
//     the first run's time, then the median of --runs more
//   node ort_shapes.js --ort DIR --model M.onnx --mode decode --prompt 3,1,4,... \
//                      --tokens N --layers K --heads H --head-dim D [--threads 1]
//     greedy generation with a GPT-2-style decoder (input_ids, past_key_i /
//     past_value_i in, logits and present_* out) from an empty past: each
//     step's time and the tokens it chose. Several prompts of one length,
//     separated by ';' (3,1,4;1,5,9), run as a batch: then each step's
//     tokens are a list, one per row
//   node ort_shapes.js --ort DIR --model M.onnx --mode masked --shapes 1x7,4x64,...
//                      [--runs 7] [--threads 1]
//     a BERT-style encoder's input_ids and attention_mask at each
//     batch x length (row r keeps L - floor(r L / 4) tokens): the first
//     run, the median of --runs more, and the output's sum of |x|
// Prints one JSON object on stdout.
'use strict';

function parseArgs(argv) {
  const opts = { runs: 5, threads: 1, width: 256 };
  for (let i = 0; i < argv.length; i += 2) {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    opts[argv[i].replace(/^--/, '')] = argv[i + 1];
  }
  for (const k of ['ort', 'model', 'mode'])
    if (!opts[k]) throw new Error(`--${k} is required`);
  return opts;
}

const now = () => Number(process.hrtime.bigint()) / 1e6;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
};

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ort = require(require('path').join(opts.ort, 'node_modules', 'onnxruntime-node'));
  const threads = Number(opts.threads);
  const t0 = now();
  const session = await ort.InferenceSession.create(opts.model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const sessionMs = now() - t0;
  const out = { session_ms: sessionMs };
  if (opts.mode === 'lengths') {
    const width = Number(opts.width), runs = Number(opts.runs);
    out.lengths = [];
    for (const L of opts.lengths.split(',').map(Number)) {
      const data = new Float32Array(L * width);
      for (let i = 0; i < data.length; ++i) data[i] = 0.01 * ((i % 13) - 6);
      const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', data, [1, L, width]) };
      let s = now();
      await session.run(feeds);
      const first = now() - s;
      const times = [];
      for (let r = 0; r < runs; ++r) {
        s = now();
        await session.run(feeds);
        times.push(now() - s);
      }
      out.lengths.push({ length: L, first_ms: first, steady_ms: median(times) });
    }
  } else if (opts.mode === 'decode') {
    const layers = Number(opts.layers), heads = Number(opts.heads), hd = Number(opts['head-dim']);
    let rows = opts.prompt.split(';').map((p) => p.split(',').map(Number));
    const batch = rows.length;
    const feeds = {};
    for (let i = 0; i < layers; ++i)
      for (const kv of ['key', 'value'])
        feeds[`past_${kv}_${i}`] = new ort.Tensor('float32', new Float32Array(0), [batch, heads, 0, hd]);
    const steps = [], tokens = [];
    for (let step = 0; step <= Number(opts.tokens); ++step) {
      const t = rows[0].length;
      const flat = BigInt64Array.from(rows.flat().map(BigInt));
      feeds.input_ids = new ort.Tensor('int64', flat, [batch, t]);
      const s = now();
      const r = await session.run(feeds);
      steps.push(now() - s);
      const logits = r.logits, v = logits.dims[2];
      const chosen = [];
      for (let b = 0; b < batch; ++b) {
        const base = (b * t + t - 1) * v;
        let best = 0;
        for (let j = 1; j < v; ++j)
          if (logits.data[base + j] > logits.data[base + best]) best = j;
        chosen.push(best);
      }
      tokens.push(batch === 1 ? chosen[0] : chosen);
      rows = chosen.map((c) => [c]);
      for (let i = 0; i < layers; ++i)
        for (const kv of ['key', 'value']) feeds[`past_${kv}_${i}`] = r[`present_${kv}_${i}`];
    }
    out.steps_ms = steps;
    out.tokens = tokens;
  } else if (opts.mode === 'masked') {
    // input_ids and attention_mask at each BxL of --shapes, filled as
    // shapes_bench.masked_inputs does; the first run, the median of --runs
    // more, and the output's sum of |x| and first values for the check.
    const runs = Number(opts.runs);
    out.shapes = [];
    for (const s of opts.shapes.split(',')) {
      const [B, L] = s.split('x').map(Number);
      const ids = new BigInt64Array(B * L), mask = new BigInt64Array(B * L);
      for (let r = 0; r < B; ++r) {
        const keep = L - Math.floor((r * L) / 4);
        for (let i = 0; i < L; ++i) {
          ids[r * L + i] = BigInt((r * 131 + i * 17 + 3) % 1000);
          mask[r * L + i] = i < keep ? 1n : 0n;
        }
      }
      const feeds = { input_ids: new ort.Tensor('int64', ids, [B, L]),
                      attention_mask: new ort.Tensor('int64', mask, [B, L]) };
      let t = now();
      const r = await session.run(feeds);
      const first = now() - t;
      const times = [];
      for (let k = 0; k < runs; ++k) {
        t = now();
        await session.run(feeds);
        times.push(now() - t);
      }
      const data = r[session.outputNames[0]].data;
      let sumAbs = 0;
      for (let i = 0; i < data.length; ++i) sumAbs += Math.abs(data[i]);
      out.shapes.push({ batch: B, length: L, first_ms: first, steady_ms: median(times),
                        sum_abs: sumAbs, head: Array.from(data.slice(0, 8)) });
    }
  } else {
    throw new Error(`unknown --mode ${opts.mode}`);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_shapes: ${e.message}\n`);
  process.exit(1);
});
