#!/usr/bin/env python3
"""kiln.serve.Batcher against single-request runs: throughput and latency.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench/batcher_bench.py \
        [--model test/e2e/models/bert_mask/model.onnx] [--clients 32] [--requests 500]

The same requests (BERT-style encoder of test/e2e/models/bert_mask, length
7, batch and length dynamic) are answered two ways, alternating rounds:
each client thread calls model.run() on its request alone (the model is
thread-safe; kernels use one thread each, the clients spread over the
cores), or submits it to one Batcher, whose model spreads each batch's
kernels over the cores (--batched-threads).
Prints requests per second and each request's latency (p50, p99, from
submit to answer) as medians over the rounds, and the batcher's mean batch.
"""

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))

import kiln  # noqa: E402
import kiln.serve  # noqa: E402


def request(seed, length):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 100, size=(1, length), dtype=np.int64)
    mask = np.ones((1, length), dtype=np.int64)
    mask[0, rng.integers(1, length + 1):] = 0
    return {"input_ids": ids, "attention_mask": mask}


def drive(clients, per_client, answer):
    """Runs `answer(feeds)` from `clients` threads; returns (seconds, latencies)."""
    feeds = [request(s, 7) for s in range(64)]
    latencies = [[] for _ in range(clients)]

    def client(t):
        for i in range(per_client):
            start = time.perf_counter()
            answer(feeds[(t * 31 + i) % len(feeds)])
            latencies[t].append(time.perf_counter() - start)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, [x for each in latencies for x in each]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.join(HERE, "..", "..", "test", "e2e", "models",
                                                   "bert_mask", "model.onnx"))
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--requests", type=int, default=500, help="per client")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batched-threads", type=int, default=0,
                   help="threads of the batcher's model (0: the physical cores)")
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--max-delay-ms", type=float, default=1.0)
    args = p.parse_args()
    # Both ways use every core: single requests from many client threads
    # on a model of one thread each; batches from the batcher's one worker
    # on a model that spreads its kernels over the cores.
    model = kiln.compile(args.model, threads=1, cache=False)
    pooled = kiln.compile(args.model, threads=args.batched_threads, cache=False)
    for m in (model, pooled):
        m.run(None, request(0, 7))  # compiled once for every shape
    total = args.clients * args.requests
    results = {"alone": [], "batched": []}
    batches = []
    for _ in range(args.rounds):
        seconds, lat = drive(args.clients, args.requests, lambda f: model.run(None, f))
        results["alone"].append((total / seconds, lat))
        with kiln.serve.Batcher(pooled, max_batch=args.max_batch,
                                max_delay_ms=args.max_delay_ms) as b:
            seconds, lat = drive(args.clients, args.requests, lambda f: b.run(f))
            batches.append(b.stats["rows"] / max(b.stats["runs"], 1))
        results["batched"].append((total / seconds, lat))
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %z')}; model {os.path.basename(os.path.dirname(args.model))}; "
          f"{args.clients} clients x {args.requests} requests, {args.rounds} alternating rounds; "
          f"batcher max_batch={args.max_batch} max_delay_ms={args.max_delay_ms}")
    for name, rounds in results.items():
        rate = statistics.median(r for r, _ in rounds)
        p50 = statistics.median(float(np.percentile(lat, 50)) for _, lat in rounds) * 1e3
        p99 = statistics.median(float(np.percentile(lat, 99)) for _, lat in rounds) * 1e3
        print(f"{name:>8}: {rate:8.0f} requests/s, latency p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    alone = statistics.median(r for r, _ in results["alone"])
    batched = statistics.median(r for r, _ in results["batched"])
    print(f"throughput batched / alone: {batched / alone:.2f}x; mean batch {statistics.mean(batches):.1f} rows")


if __name__ == "__main__":
    main()
