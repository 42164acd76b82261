"""scikit-learn's bundled 8x8 digits (1,797 images, 10 classes): the offline default task."""

from __future__ import annotations

import numpy as np
import torch

from daybreak.data.base import TaskData

# The split is fixed (seed 0, 25% test, stratified) whatever the run's --seed, so every run is scored on the
# same 450 test images; --seed changes initialization and data order only.
SPLIT_SEED = 0
TEST_FRACTION = 0.25
# A run's data_source for this task: no folder, the set ships inside scikit-learn.
SOURCE = "bundled with scikit-learn (sklearn.datasets.load_digits), no data folder; split seed 0, 25% test"


def load_digits_task() -> TaskData:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = bunch.images.astype(np.float32)  # (1797, 8, 8), values 0..16
    labels = bunch.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=labels
    )
    return TaskData(
        train_x=torch.from_numpy(x_train).unsqueeze(1),
        train_y=torch.from_numpy(y_train),
        eval_x=torch.from_numpy(x_test).unsqueeze(1),
        eval_y=torch.from_numpy(y_test),
        num_classes=10,
        official=True,
        source=SOURCE,
    )
