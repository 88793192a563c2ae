"""The built-in workload's all-reduce health check follows the dilation factor (DLTESTBED_DILATION)."""
import pytest

pytest.importorskip("tensorflow")

from tensorflow.python.distribute import collective_all_reduce_strategy as cars  # noqa: E402

from workloads.train import dilate_health_check  # noqa: E402

EXT = cars.CollectiveAllReduceExtended


@pytest.fixture
def restore():
    saved = EXT._check_health_interval, EXT._check_health_timeout
    yield saved
    EXT._check_health_interval, EXT._check_health_timeout = saved


def test_health_check_times_are_multiplied_by_k(restore):
    interval, timeout = restore
    dilate_health_check(4.0)
    assert EXT._check_health_interval == pytest.approx(4 * interval)
    assert EXT._check_health_timeout == pytest.approx(4 * timeout)


def test_no_dilation_leaves_tensorflow_alone(restore):
    dilate_health_check(1.0)
    assert (EXT._check_health_interval, EXT._check_health_timeout) == restore
