"""The built-in workload's wall-clock timers between workers follow the dilation factor
(DLTESTBED_DILATION): the all-reduce health check and the coordination service's heartbeat."""
import pytest

pytest.importorskip("tensorflow")

from tensorflow.python.distribute import collective_all_reduce_strategy as cars  # noqa: E402
from tensorflow.python.eager import context  # noqa: E402

from workloads.train import HEARTBEAT_TIMEOUT_MS, dilate_tf_timers  # noqa: E402

EXT = cars.CollectiveAllReduceExtended


@pytest.fixture
def restore():
    saved = EXT._check_health_interval, EXT._check_health_timeout
    configure = context.Context.configure_coordination_service
    config = context.context()._coordination_service_config
    yield saved
    EXT._check_health_interval, EXT._check_health_timeout = saved
    context.Context.configure_coordination_service = configure
    context.context()._coordination_service_config = config


def test_health_check_times_are_multiplied_by_k(restore):
    interval, timeout = restore
    dilate_tf_timers(4.0)
    assert EXT._check_health_interval == pytest.approx(4 * interval)
    assert EXT._check_health_timeout == pytest.approx(4 * timeout)


def test_the_coordination_heartbeat_time_out_is_multiplied_by_k(restore):
    """As MultiWorkerMirroredStrategy configures it (no heartbeat time-out given: TensorFlow's 10 s)."""
    dilate_tf_timers(4.0)
    context.context().configure_coordination_service(service_type="standalone",
                                                     service_leader="/job:worker/replica:0/task:0")
    assert context.context()._coordination_service_config.heartbeat_timeout_in_ms == 4 * HEARTBEAT_TIMEOUT_MS


def test_no_dilation_leaves_tensorflow_alone(restore):
    dilate_tf_timers(1.0)
    assert (EXT._check_health_interval, EXT._check_health_timeout) == restore
    context.context().configure_coordination_service(service_type="standalone",
                                                     service_leader="/job:worker/replica:0/task:0")
    assert context.context()._coordination_service_config.heartbeat_timeout_in_ms == 0
