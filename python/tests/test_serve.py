"""kiln.serve.Batcher under concurrent load and with bad requests.

The model is the BERT-style encoder of test/e2e/models/bert_mask (batch and
length dynamic, compiled once for every shape). Each response is checked
against a run of its request alone."""

import os
import threading
import time

import numpy as np
import pytest

import kiln
import kiln.serve

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "e2e",
                     "models", "bert_mask", "model.onnx")


def request(seed, length=7):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 100, size=(1, length), dtype=np.int64)
    mask = np.ones((1, length), dtype=np.int64)
    mask[0, rng.integers(1, length + 1):] = 0  # some padding at the end
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture(scope="module")
def model():
    return kiln.compile(MODEL, threads=1, cache=False)


def test_many_threads_each_response_is_its_own(model):
    """32 threads x 500 requests drawn from 64 distinct inputs: every
    response equals its request's run alone (to float32 rounding of the
    batched kernels), none is lost or answered twice."""
    feeds = [request(seed) for seed in range(64)]
    alone = [model.run(None, f)[0] for f in feeds]
    threads, per_thread = 32, 500
    answered = [0] * (threads * per_thread)
    worst = [0.0] * threads
    failures = []
    with kiln.serve.Batcher(model, max_batch=32, max_delay_ms=1.0) as batcher:
        def client(t):
            try:
                futures = []
                for i in range(per_thread):
                    k = (t * 7919 + i * 104729) % len(feeds)
                    futures.append((t * per_thread + i, k, batcher.submit(feeds[k])))
                    if len(futures) == 8:  # a few in flight per thread
                        for slot, k2, f in futures:
                            check(slot, k2, f.result(timeout=60))
                        futures = []
                for slot, k2, f in futures:
                    check(slot, k2, f.result(timeout=60))
            except Exception as error:  # noqa: BLE001
                failures.append(error)

        def check(slot, k, outputs):
            answered[slot] += 1
            assert len(outputs) == 1 and outputs[0].shape == alone[k].shape
            worst[slot // per_thread] = max(worst[slot // per_thread],
                                            float(np.max(np.abs(outputs[0] - alone[k]))))

        workers = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        stats = dict(batcher.stats)
    assert not failures, failures[:3]
    assert answered == [1] * (threads * per_thread)
    assert max(worst) <= 1e-5, max(worst)
    assert stats["requests"] == threads * per_thread
    assert stats["rows"] == threads * per_thread
    assert stats["runs"] < stats["requests"], "requests were gathered into batches"


def test_a_bad_request_fails_alone(model):
    """A request the model refuses (ids as float32) in a batch of good ones
    fails with the model's own error; the others are answered; requests of
    another length run in a batch of their own."""
    good = [request(seed) for seed in range(6)]
    other = request(99, length=5)
    bad = {"input_ids": good[0]["input_ids"].astype(np.float32),
           "attention_mask": good[0]["attention_mask"]}
    with kiln.serve.Batcher(model, max_batch=16, max_delay_ms=50.0) as batcher:
        futures = [batcher.submit(f) for f in good[:3]]
        wrong = batcher.submit(bad)
        shorter = batcher.submit(other)
        futures += [batcher.submit(f) for f in good[3:]]
        for f, feeds in zip(futures, good):
            np.testing.assert_allclose(f.result(timeout=30)[0], model.run(None, feeds)[0],
                                       rtol=0, atol=1e-5)
        with pytest.raises(kiln.Error):
            wrong.result(timeout=30)
        np.testing.assert_allclose(shorter.result(timeout=30)[0], model.run(None, other)[0],
                                   rtol=0, atol=1e-5)
    uneven = {"input_ids": good[0]["input_ids"], "attention_mask": np.ones((2, 7), np.int64)}
    with kiln.serve.Batcher(model) as batcher:
        with pytest.raises(ValueError, match="same first"):
            batcher.run(uneven)


class _Blocking:
    """A model whose run waits for `go`: the queue fills behind it."""

    def __init__(self):
        self.go = threading.Event()
        self.inputs = []

    def run(self, names, feeds):
        self.go.wait(30)
        return [feeds["x"] * 2]


def test_bounded_queue_and_close():
    slow = _Blocking()
    batcher = kiln.serve.Batcher(slow, max_batch=1, max_delay_ms=0, max_queue=2)
    x = np.ones((1, 3), np.float32)
    first = batcher.submit({"x": x})
    time.sleep(0.05)  # the worker has taken it and waits in run()
    queued = [batcher.submit({"x": x + k}) for k in (1, 2)]
    with pytest.raises(kiln.serve.QueueFull):
        batcher.submit({"x": x}, timeout=0.05)
    slow.go.set()
    np.testing.assert_array_equal(first.result(timeout=30)[0], x * 2)
    for k, f in zip((1, 2), queued):
        np.testing.assert_array_equal(f.result(timeout=30)[0], (x + k) * 2)
    batcher.close()
    with pytest.raises(kiln.serve.Closed):
        batcher.submit({"x": x})
