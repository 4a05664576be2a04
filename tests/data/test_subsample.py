"""The data set a config's jobs see: read with its options, subsampled per class."""

import numpy as np
import pytest

from pipeline_lib.data import load_dataset
from pipeline_lib.data.subsample import prepare_dataset, subsample_dataset


def test_prepare_dataset_keeps_the_configured_images_per_class() -> None:
    settings = {"options": {}, "max_train_per_class": 7, "max_test_per_class": 3}
    prepared = prepare_dataset("digits", settings)
    for labels, limit in ((prepared.train_labels, 7), (prepared.test_labels, 3)):
        assert np.bincount(labels).tolist() == [limit] * 10
    # The same images as reading and subsampling by hand, whatever the experiment seed.
    by_hand = subsample_dataset(load_dataset("digits"), max_train_per_class=7, max_test_per_class=3)
    np.testing.assert_array_equal(prepared.train_images, by_hand.train_images)
    np.testing.assert_array_equal(prepared.test_labels, by_hand.test_labels)


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_test_per_class must be >= 1"):
        prepare_dataset("digits", {"max_test_per_class": 0})
