"""Child process of :func:`labkit.formats.tfdata.tfdata_measure` (chapter 12b): tf.data alone.

Run as a script, not imported: TensorFlow and the ``tfrecord`` package both register the
``tensorflow.Example`` protobuf messages, so they cannot share a process. Prints one JSON
line: TensorFlow's version, samples/s per pass, and a sha256 of the rows in id order.
"""

import hashlib
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv):
    spec_json = json.loads(argv[1])
    import numpy as np
    import tensorflow as tf
    import torch

    files, batch_size = spec_json["files"], spec_json["batch_size"]
    features = {"id": tf.io.FixedLenFeature([], tf.int64),
                "row": tf.io.FixedLenFeature([], tf.string)}

    def parse(record):
        ex = tf.io.parse_single_example(record, features)
        return tf.io.decode_raw(ex["row"], tf.float32), ex["id"]

    auto = tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=min(len(files), 4), num_parallel_calls=auto)
    if spec_json["shuffle"]:
        ds = ds.shuffle(spec_json["shuffle"], seed=0)
    ds = ds.map(parse, num_parallel_calls=auto).batch(batch_size).prefetch(auto)
    rates, rows, ids = [], None, None
    for p in range(spec_json["warmup"] + spec_json["passes"]):
        got_rows, got_ids, t0, t1, n = [], [], time.perf_counter(), None, 0
        for k, (r, i) in enumerate(ds.as_numpy_iterator()):
            x, y = torch.from_numpy(np.asarray(r)), torch.from_numpy(np.asarray(i))
            if k == 0:
                t1 = time.perf_counter()  # steady state from the first batch, as lk.measure
            else:
                n += len(y)
            got_rows.append(x)
            got_ids.append(y)
        if p >= spec_json["warmup"]:
            rates.append(n / (time.perf_counter() - t1) if n else float("nan"))
        rows, ids = torch.cat(got_rows), torch.cat(got_ids)
    order = torch.argsort(ids)
    print(json.dumps({
        "tensorflow": tf.__version__, "samples_per_s": rates, "samples": len(ids),
        "unique": int(torch.unique(ids).numel()), "first_s": t1 - t0,
        "sha256": hashlib.sha256(rows[order].numpy().tobytes()).hexdigest(),
    }))


if __name__ == "__main__":
    main(sys.argv)
