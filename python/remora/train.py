# SPDX-License-Identifier: BSD-3-Clause
"""remora.train: the Trainer (train/trainer.h, docs/trainer.md) driven from Python.

Subclass DataSource (train_loss(state) -> StepLoss or a loss tensor;
evaluate(split, max_batches) -> Evaluation or a float; optionally position()
and set_position(p) for exact resume) and Callback (any of its on_* hooks),
then:

    opts = remora.train.TrainerOptions(out_dir="runs/x", steps=100, eval_every=50)
    trainer = remora.train.Trainer(model, optimizer, data, opts)
    result = trainer.fit()
"""
from . import _C

Trainer = _C.train.Trainer
TrainerOptions = _C.train.TrainerOptions
DataSource = _C.train.DataSource
Callback = _C.train.Callback
StepLoss = _C.train.StepLoss
Evaluation = _C.train.Evaluation
FitResult = _C.train.FitResult
LRSchedule = _C.train.LRSchedule
Precision = _C.train.Precision
jsonl_sink = _C.train.jsonl_sink
progress_sink = _C.train.progress_sink
