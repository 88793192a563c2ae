"""PyTorch's communication settings on two gloo processes over loopback: PowerSGD past its start step on a
model larger than DDP's first bucket (which, in several buckets, aborted in gloo), and fp16."""
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from workloads import lowcomm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(rank: int, port: int, communication: dict, steps: int, losses) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
        c = lowcomm.settings({"communication": communication})
        ddp = torch.nn.parallel.DistributedDataParallel(model, **lowcomm.ddp_options(c, model))
        after_step = lowcomm.torch_setup(ddp, c)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        gen = torch.Generator().manual_seed(rank)
        for step in range(1, steps + 1):
            x, y = torch.randn(32, 784, generator=gen), torch.randint(0, 10, (32,), generator=gen)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            after_step(step)
        # the gradients were averaged: both workers hold the same weights
        flat = torch.cat([p.detach().flatten() for p in ddp.parameters()])
        gathered = [torch.zeros_like(flat) for _ in range(2)]
        dist.all_gather(gathered, flat)
        losses[rank] = float((gathered[0] - gathered[1]).abs().max())
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("communication", [{"compression": "powersgd", "rank": 4, "start_step": 2},
                                           {"compression": "fp16"}], ids=["powersgd", "fp16"])
def test_two_workers_train_past_the_start_step_and_agree(communication):
    manager = mp.Manager()
    result = manager.dict()
    mp.start_processes(_train, args=(_free_port(), communication, 6, result), nprocs=2, join=True,
                       start_method="spawn")
    assert set(result.keys()) == {0, 1}
    assert result[0] < 1e-5 and result[1] < 1e-5


def test_powersgd_gets_the_whole_model_in_one_bucket():
    model = torch.nn.Linear(1024, 1024)                              # 4 MiB of weights
    c = lowcomm.settings({"communication": {"compression": "powersgd", "rank": 4, "start_step": 2}})
    assert lowcomm.ddp_options(c, model)["bucket_cap_mb"] > 4
    assert lowcomm.ddp_options(lowcomm.settings({}), model) == {}
