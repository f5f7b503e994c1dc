# SPDX-License-Identifier: BSD-3-Clause
"""Writes tests/data/tensorboard/golden.tfevents with TensorBoard's own writer.

tests/test_tensorboard.cpp writes the same events with Remora's EventWriter
(train/tensorboard.h) and compares the bytes; this script also reads the file
back with TensorBoard's EventAccumulator to show what TensorBoard sees.
Needs `pip install tensorboard` in a virtual environment outside the repository:
    python tools/goldens/make_tensorboard_golden.py
"""
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

out = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "tensorboard")
os.makedirs(out, exist_ok=True)
path = os.path.join(out, "events.out.tfevents.1700000000.golden")


def scalars(step, wall, values):
    s = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values])
    return event_pb2.Event(wall_time=wall, step=step, summary=s)


events = [
    event_pb2.Event(wall_time=1700000000.5, file_version="brain.Event:2"),
    scalars(10, 1700000001.25, [("train/loss", 2.5), ("train/lr", 0.001)]),
    scalars(20, 1700000002.0, [("train/loss", 2.25), ("valid/bpc", 1.125)]),
    # A resumed run restarts at step 15: TensorBoard drops the step-20 points above.
    event_pb2.Event(wall_time=1700000003.0, step=15,
                    session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)),
    scalars(15, 1700000004.0, [("train/loss", 2.375)]),
]
with open(path, "wb") as f:
    w = RecordWriter(f)
    for e in events:
        w.write(e.SerializeToString())
    w.flush()

acc = EventAccumulator(out)
acc.Reload()
for tag in acc.Tags()["scalars"]:
    print(tag, [(e.step, e.value) for e in acc.Scalars(tag)])
sys.exit(0)
