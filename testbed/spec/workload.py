"""The workload section of the experiment file: what trains (engine, strategy, model), how much (the
same data or the same steps at every node count), and each strategy's own settings."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PlainSerializer, create_model
from pydantic_core import PydanticCustomError

import testbed.limits as limits
from testbed.spec.keypaths import KnownKeys
from testbed.spec.settings import Strict
from testbed.spec.values import Count, NodeName, PositiveTime, Size, Whole
import workloads.balance as balance
import workloads.communication as comm
import workloads.zoo as zoo

MODEL_PARAMS = {
    "mlp": ("width", "depth", "input_dim", "classes"),
    "cnn": ("filters", "dense", "classes"),
    "caption": ("vocab_size", "max_len", "feature_dim", "embed_dim", "units"),
}
BUILTIN_MODELS = tuple(MODEL_PARAMS)
ZOO_PARAMS = {prefix: tuple(source.PARAMS) for prefix, source in zoo.SOURCES.items() if prefix != "builtin"}
MODEL_NAME = r"^(mlp|cnn|caption|[a-z][a-z0-9_]*/[A-Za-z0-9][A-Za-z0-9_.\-]*)$"


def model_params_allowed(model: str) -> tuple[str, ...]:
    """The model_params keys a model takes (a zoo model: its source's)."""
    return MODEL_PARAMS.get(model) or ZOO_PARAMS.get(model.partition("/")[0], ())


class PsConf(Strict):
    """ParameterServerStrategy. placement: role (chief, worker, ps) -> host names; null = default."""

    servers: Count = 1
    placement: dict[Literal["chief", "worker", "ps"], list[NodeName]] | None = None
    partition: bool = False
    steps_per_execution: Count = 1


class AllreduceConf(Strict):
    """MultiWorkerMirroredStrategy collective options."""

    implementation: Literal["auto", "ring"] = "auto"
    bytes_per_pack: Annotated[int, Field(ge=0, le=limits.MAX_SIZE)] = 0


def _field(key: comm.Key, name: str):
    """A communication method's key as a pydantic field: its type, bounds (a cap of limits.py by name) and
    default; a section is a nested model of its keys (NameConf), null by default."""
    if key.kind == "section":
        section = create_model(f"{name.title()}Conf", __base__=Strict, __doc__=key.doc or None,
                               **{k: _field(v, k) for k, v in key.keys.items()})
        return section | None, Field(key.default, description=key.description or None)
    bounds = {b: getattr(limits, v) if isinstance(v, str) else v
              for b in ("ge", "gt", "le", "lt") if (v := getattr(key, b)) is not None}
    kind = {"int": int, "float": float, "bool": bool, "name": Annotated[str, AfterValidator(_known_method)]}[key.kind]
    return (Annotated[kind, Field(**bounds)] if bounds else kind), Field(key.default,
                                                                         description=key.description or None)


def _known_method(name: str) -> str:
    """compression names a method of workloads/communication/ (checked when the file is read, so that a method
    registered later is known)."""
    known = comm.names()
    if name not in known:
        expected = " or ".join(filter(None, [", ".join(map(repr, known[:-1])), repr(known[-1])]))
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
    return name


class _Communication(Strict):
    """Communication-efficient training (all-reduce): gradients compressed before the all-reduce, or local
    steps with the model averaged every sync_every steps (local SGD), optionally with an outer optimizer; each
    method and its keys are declared in workloads/communication/."""

    def in_force(self) -> bool:
        """Whether anything but the usual all-reduce of every step's gradients is asked for."""
        return comm.method_of(self.model_dump()).NAME != comm.PLAIN

    def settings(self) -> dict:
        """The setting as the methods read it (a plain dict, sections too)."""
        return self.model_dump()


CommunicationConf = create_model("CommunicationConf", __base__=_Communication, __doc__=_Communication.__doc__,
                                 **{name: _field(key, name) for name, key in comm.spec_keys().items()})


def _balance(value) -> dict:
    """workload.balance as its method reads it ({"method": NAME, ...}; workloads/balance/)."""
    try:
        return balance.parse(value)
    except ValueError as err:
        raise PydanticCustomError("balance_error", "{reason}", {"reason": str(err)}) from None


Balance = Annotated[str | dict[str, Any], AfterValidator(_balance), PlainSerializer(lambda v: balance.written(v))]


class DataConf(Strict):
    """Training data: synthetic, or Flickr8k features/captions at path."""

    kind: Literal["synthetic", "flickr8k"] = "synthetic"
    path: str | None = None


class AdvisorConf(Strict):
    """strategy auto: where the cost model's parameters come from, and the gradient of a script."""

    results: str | list[str] | None = Field(
        None, description="results folder(s) whose runs the cost model is fitted on (relative to this file, "
        "else to the working directory), e.g. an all-reduce and a ps sweep; null: rough defaults")
    gradient_size: Size | None = Field(None, description="gradient bytes per step (needed with workload.script; "
                                       "default: the built-in model's parameters x 4 bytes)")


class StrategySwitchConf(Strict):
    """strategy switch: the strategy training starts with, and when it changes to the other."""

    start: Literal["allreduce", "ps"] = Field("allreduce", description="the strategy of the first epoch")
    margin: Annotated[float, Field(ge=0, le=100)] = Field(
        0.2, description="switch at an epoch's end when the cost model predicts the other strategy this much "
        "more samples/s than the epoch measured (0.2: 20% more)")
    max_switches: Whole = Field(1, description="switches per run")


DEFAULT_STEPS_PER_EPOCH = 20


class Workload(Strict):
    """What trains: engine, strategy, model and its size, and the training loop."""

    engine: Literal["tensorflow", "pytorch"] = Field(
        "tensorflow", description="pytorch: DistributedDataParallel over torch.distributed's gloo backend "
        "(strategies single and allreduce, models mlp and cnn, or your own torchrun-style script)")
    strategy: Literal["single", "allreduce", "ps", "auto", "switch"] = Field(
        "allreduce", description="single runs on the first host; auto: ps or allreduce, chosen after the "
        "checks by the cost model (workload.advisor); switch: starts with workload.switch.start and "
        "changes strategy at an epoch's end when the cost model predicts the other faster")
    model: Annotated[str, Field(pattern=MODEL_NAME, max_length=200)] = Field(
        "mlp", description="a built-in model (mlp, cnn, caption) or one of a model zoo by name, built with random "
        "weights: torchvision/resnet50, timm/vit_small_patch16_224, transformers/gpt2 (PyTorch), keras/ResNet50 "
        "(TensorFlow); docs/profiles.md")
    model_params: Annotated[dict[str, Any], KnownKeys(tuple(sorted({k for ks in [*MODEL_PARAMS.values(),
                                                                                 *ZOO_PARAMS.values()]
                                                                      for k in ks})))] = Field(
        default_factory=dict, description="mlp: width, depth, input_dim, classes; cnn: filters, "
        "dense, classes; caption: vocab_size, max_len, feature_dim, embed_dim, units; torchvision/, timm/, keras/: "
        "image_size, channels, classes; transformers/: seq_len, layers, width, heads, vocab_size")
    batch_per_worker: Count = 32
    epochs: Count = 1
    fixed: Literal["data", "steps"] = Field(
        "data", description="what stays the same as nodes are added: data (samples_per_epoch split over the "
        "workers, so each runs samples_per_epoch / global batch steps per epoch: every node count trains the same "
        "samples) or steps (steps_per_epoch on every worker: weak scaling, more nodes train more samples)")
    samples_per_epoch: Count | None = Field(
        None, description="fixed data: samples per epoch over all workers (default: steps_per_epoch x "
        "batch_per_worker, one worker's epoch)")
    steps_per_epoch: Count | None = Field(
        None, description=f"fixed steps: steps per epoch of every worker (ps: of the coordinator); fixed data: the "
        f"steps of one worker alone, when samples_per_epoch is not set (null: {DEFAULT_STEPS_PER_EPOCH})",
        json_schema_extra={"default": DEFAULT_STEPS_PER_EPOCH})
    learning_rate: Annotated[float, Field(gt=0, le=10)] = Field(
        1e-3, description="Adam's learning rate for one worker's batch (batch_per_worker); lr_scaling scales it "
        "with the global batch")
    lr_scaling: Literal["none", "linear", "sqrt"] = Field(
        "none", description="the learning rate as the global batch grows with the workers (all-reduce): none (the "
        "same rate), linear (x workers: Goyal et al. 2017) or sqrt (x sqrt(workers): Hoffer et al. 2017); ps and "
        "single train one worker's batch a step, so theirs stays learning_rate")
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0
    timeout: PositiveTime = Field(600.0, json_schema_extra={"default": "10m"})
    port: Annotated[int, Field(ge=1024, le=65535)] = 50501
    ps: PsConf = Field(default_factory=PsConf)
    allreduce: AllreduceConf = Field(default_factory=AllreduceConf)
    communication: CommunicationConf = Field(
        default_factory=CommunicationConf, description="all-reduce: gradient compression or local SGD "
        "(sync_every); docs/communication.md lists the methods")
    balance: Balance = Field(
        {"method": "none"}, description=f"machines of different speeds, strategy allreduce: {balance.forms()}; static: each "
        "worker's batch proportional to its node's speed (cores, or its replayed step time), the global batch kept "
        "(docs/mixed-machines.md)", json_schema_extra={"default": "none"})
    advisor: AdvisorConf = Field(default_factory=AdvisorConf, description="strategy auto and switch: the cost model")
    switch: StrategySwitchConf = Field(default_factory=StrategySwitchConf,
                                       description="strategy switch: start, margin, max_switches")
    data: DataConf = Field(default_factory=DataConf)
    threads: Annotated[int, Field(ge=0, le=limits.MAX_CORES)] | Literal["auto"] = Field(
        "auto", description="TensorFlow intra-op threads per task; auto: the task's share of its "
        "machine's cores within its CPU limit; 0: TensorFlow's default (all cores)")
    eval: bool | None = Field(None, description="caption model: BLEU-1..4 on the held-out split after each epoch "
                              "(null: on with flickr8k data)")
    script: str | None = Field(None, description="your own training script (path relative to this file), run "
                               "unmodified in every task instead of the built-in workload, with TF_CONFIG set")
    args: Annotated[list[str], Field(max_length=limits.MAX_ENV)] = Field(
        default_factory=list, description="command-line arguments of the script")
    files: Annotated[list[str], Field(max_length=limits.MAX_ENV)] = Field(
        default_factory=list, description="files or folders the script needs besides itself, relative to its "
        "folder (e.g. [model.py, data/]); docker and remote nodes get only the script and these")
    script_roles: Literal["coordinator", "all"] = Field(
        "coordinator", description="ps: the testbed runs the servers and the script as coordinator; all: the "
        "script runs in every task")
    env: Annotated[dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str],
                   Field(max_length=limits.MAX_ENV)] = Field(
        default_factory=dict, description="environment of every task (e.g. TF_USE_LEGACY_KERAS: '0')")
    recovery: Literal["none", "backup"] = Field(
        "none", description="backup: tf_keras BackupAndRestore into the run folder; a task that is killed or "
        "crashes is started again (max_restarts) and training resumes from the last backup")
    backup_every_steps: Count = Field(5, description="recovery backup: steps between backups (ps: every epoch)")
    max_restarts: Whole = Field(1, description="recovery backup: restarts per run")

    def epoch_samples(self) -> int:
        """Samples per epoch over all workers under fixed data (samples_per_epoch, else one worker's
        steps_per_epoch batches)."""
        return self.samples_per_epoch or self.epoch_steps * self.batch_per_worker

    @property
    def epoch_steps(self) -> int:
        """steps_per_epoch as the file sets it, else its default."""
        return self.steps_per_epoch or DEFAULT_STEPS_PER_EPOCH

    def samples_per_step(self, workers: int, strategy: str | None = None) -> int:
        """Samples one step trains: the global batch under all-reduce; one worker's batch under ps (a
        step is one worker's closure) and single."""
        return self.batch_per_worker * (max(1, workers) if (strategy or self.strategy) == "allreduce" else 1)

    def learning_rate_at(self, workers: int, strategy: str | None = None) -> float:
        """Adam's learning rate at a point with `workers` workers: learning_rate x the global batch over one
        worker's batch (the samples per step over batch_per_worker) under lr_scaling linear, x its square
        root under sqrt, unchanged under none (and where a step trains one worker's batch: ps, single)."""
        grown = self.samples_per_step(workers, strategy) / self.batch_per_worker
        return self.learning_rate * {"none": 1.0, "linear": grown, "sqrt": grown ** 0.5}[self.lr_scaling]

    def steps_at(self, workers: int, strategy: str | None = None) -> int:
        """Steps per epoch at a point with `workers` workers: steps_per_epoch under fixed steps; under
        fixed data the epoch's samples over the samples per step, to the nearest whole step (at least 1),
        so every node count trains the same samples within one step's."""
        if self.fixed == "steps":
            return self.epoch_steps
        return max(1, int(self.epoch_samples() / self.samples_per_step(workers, strategy) + 0.5))
