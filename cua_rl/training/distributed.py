"""Data-parallel learning over several processes: the collectives :func:`vlm_update` needs.

A :class:`DistContext` wraps one torch.distributed process group (gloo on CPU, NCCL on CUDA, one
process per GPU as torchrun starts them). Each rank collects its own rollouts and calls
:func:`cua_rl.training.vlm.vlm_update` with ``dist=``; the update equals one process updating over
the concatenation of the ranks' batches (rank order), because:

* every rank holds the same parameters (:meth:`DistContext.broadcast_parameters` from rank 0 at
  the start) and the same optimizer, and takes the same optimizer step from the same gradient;
* the loss of a minibatch is normalised by its *global* row count, so the sum over ranks of the
  ranks' gradients (:meth:`DistContext.all_reduce_gradients`) is the single-process gradient.

Why an explicit gradient all-reduce and not ``torch.nn.parallel.DistributedDataParallel``:

* DDP's reducer is armed by a call through the wrapper's ``forward``; the update calls
  ``policy.evaluate_actions`` (twice with a KL term: policy and adapters-off reference), and the
  value head is unused by group-relative updates, so DDP would need ``find_unused_parameters``
  and a forward routed through the wrapper.
* Exactness: a rank may hold no row of a minibatch (the global shuffle decides) and then runs no
  forward at all (under DDP it would need a dummy forward to arm the reducer); it still joins
  the all-reduce with zeros. A parameter that gets no gradient on any rank keeps ``grad=None``,
  as in one process, so Adam does not step it (a zero gradient would still move it by Adam's
  momentum).
* LoRA trains few parameters (r 128 on every linear layer of the language model: ~150M for
  Qwen2-VL-2B, ~320M (1.3 GB in float32) for 7B): a few buckets, reduced once per optimizer step
  after the backward (and after all micro-batches), need no overlap with the backward pass.
  Gradients are summed in float32 buckets of at most ``bucket_mb`` (DDP's default cap, 25 MB),
  so the extra memory is one bucket, whatever the model size.

Not here: FSDP (sharded parameters, gradients and optimizer state) for the 7B full fine-tune.
Full fine-tuning works with this replicated scheme when a replica, its gradients and its Adam
state fit one GPU (bf16 weights and gradients, float32 moments: 12 bytes a parameter, ~27 GB for
2B; ~100 GB for 7B before activations, more than an 80 GB GPU); sharding them is future work.

torch is needed to import this module.
"""

from __future__ import annotations

import datetime
import logging
import os
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from cua_rl.errors import ConfigError, DependencyNotInstalled

try:
    import torch
    import torch.distributed as tdist
except ImportError as exc:  # pragma: no cover - torch is in every test environment
    raise DependencyNotInstalled("torch", "vlm") from exc

__all__ = ["DistContext"]

logger = logging.getLogger(__name__)

_ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class DistContext:
    """One process's view of a data-parallel group (build it with a classmethod).

    Args:
        rank: This process's rank.
        world_size: The number of processes.
        device: The device this rank trains on (``cuda:LOCAL_RANK`` with NCCL, else CPU).
        backend: ``"gloo"`` or ``"nccl"``.

    Attributes:
        rank: This process's rank (0 = main: logs and checkpoints).
        world_size: The number of processes.
        device: The device this rank trains on; build the policy there.
        backend: The process group's backend.
        group: The process group (torch's default group, which this context owns).
    """

    def __init__(self, rank: int, world_size: int, device: Any, backend: str) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = torch.device(device)
        self.backend = backend
        self.group: Any = tdist.group.WORLD
        # NCCL reduces tensors on the GPU; gloo on the CPU.
        self._comm_device = self.device if backend == "nccl" else torch.device("cpu")

    # -- building --------------------------------------------------------------------------

    @classmethod
    def from_env(cls, *, backend: str | None = None, timeout_s: float = 1800.0) -> DistContext:
        """Join the group torchrun describes in the environment.

        Reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``.
        With CUDA available the backend is NCCL and each rank uses ``cuda:LOCAL_RANK`` (made the
        current device); otherwise gloo on the CPU.

        Args:
            backend: ``"gloo"`` or ``"nccl"``; None = NCCL when CUDA is available, else gloo.
            timeout_s: How long a collective waits for the other ranks.

        Raises:
            ConfigError: If a variable is missing or malformed, or LOCAL_RANK names no GPU.
        """
        missing = [name for name in _ENV_VARS if name not in os.environ]
        if missing:
            raise ConfigError(
                f"torch.distributed needs the environment variables {missing} "
                f"(torchrun sets {list(_ENV_VARS)}); start the learner with torchrun"
            )
        rank, world, local = (_int_env(n) for n in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
        if not 0 <= rank < world:
            raise ConfigError(f"RANK must be in [0, WORLD_SIZE={world}), got {rank}")
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        _check_backend(backend)
        if backend == "nccl":
            count = torch.cuda.device_count()
            if not 0 <= local < count:
                raise ConfigError(f"LOCAL_RANK={local} but this node has {count} CUDA devices")
            device = torch.device("cuda", local)
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        tdist.init_process_group(
            backend,
            init_method="env://",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        logger.info("rank %d of %d on %s (%s)", rank, world, device, backend)
        return cls(rank, world, device, backend)

    @classmethod
    def init_file(
        cls,
        path: str | Path,
        rank: int,
        world_size: int,
        *,
        backend: str = "gloo",
        timeout_s: float = 120.0,
    ) -> DistContext:
        """Join a group through a shared file (``file://`` rendezvous: no port to pick; tests).

        Args:
            path: A file path every rank can reach; it must not exist before the group forms.
            rank: This process's rank.
            world_size: The number of processes.
            backend: ``"gloo"`` (CPU) or ``"nccl"`` (``cuda:rank``).
            timeout_s: How long a collective waits for the other ranks.
        """
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank must be in [0, world_size={world_size}), got {rank}")
        _check_backend(backend)
        device = torch.device("cpu")
        if backend == "nccl":
            device = torch.device("cuda", rank)
            torch.cuda.set_device(device)
        tdist.init_process_group(
            backend,
            init_method=Path(path).resolve().as_uri(),
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        return cls(rank, world_size, device, backend)

    def close(self) -> None:
        """Leave the group (destroys the process group; call once per process, at the end)."""
        if tdist.is_initialized():
            tdist.destroy_process_group()

    # -- collectives -----------------------------------------------------------------------

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0 (the rank that logs and writes checkpoints)."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait until every rank reaches this point."""
        tdist.barrier(group=self.group)

    @overload
    def all_reduce_sum(self, values: float) -> float: ...

    @overload
    def all_reduce_sum(self, values: Sequence[float] | np.ndarray | Any) -> np.ndarray: ...

    def all_reduce_sum(self, values: Any) -> Any:
        """The sum over ranks, element-wise (float64; the same shape on every rank).

        Args:
            values: A float, or a vector (list, array or tensor) of numbers.

        Returns:
            A float for a float; else a float64 vector.
        """
        if isinstance(values, torch.Tensor):
            values = values.detach().cpu().numpy()
        local = np.asarray(values, dtype=np.float64)
        t = torch.as_tensor(local.reshape(-1), device=self._comm_device)
        tdist.all_reduce(t, op=tdist.ReduceOp.SUM, group=self.group)
        out = t.cpu().numpy()
        return float(out[0]) if local.ndim == 0 else out

    def all_reduce_float(self, value: float) -> float:
        """The sum over ranks of one float."""
        return self.all_reduce_sum(float(value))

    def all_gather_counts(self, count: int) -> list[int]:
        """Every rank's ``count``, in rank order."""
        t = torch.zeros(self.world_size, dtype=torch.float64, device=self._comm_device)
        t[self.rank] = float(count)
        tdist.all_reduce(t, op=tdist.ReduceOp.SUM, group=self.group)
        return [int(c) for c in t.cpu().tolist()]

    def all_gather_rows(self, rows: np.ndarray) -> list[np.ndarray]:
        """Every rank's rows, in rank order; the row counts may differ.

        Args:
            rows: (n_rank, ...) numbers (sent as float64; the trailing shape must agree).

        Returns:
            One (n_rank, ...) float64 array per rank.
        """
        local = np.asarray(rows, dtype=np.float64)
        counts = self.all_gather_counts(local.shape[0])
        tail = local.shape[1:]
        padded = torch.zeros((max(counts), *tail), dtype=torch.float64, device=self._comm_device)
        padded[: local.shape[0]] = torch.as_tensor(local, device=self._comm_device)
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        tdist.all_gather(parts, padded, group=self.group)
        return [p[:n].cpu().numpy() for p, n in zip(parts, counts, strict=True)]

    def check_same(self, what: str, value: str) -> None:
        """Raise on every rank unless every rank passed the same ``value`` (compared by CRC-32).

        Raises:
            ConfigError: Naming ``what`` and the ranks that differ from rank 0.
        """
        crc = float(zlib.crc32(value.encode()))
        seen = self.all_gather_rows(np.array([crc]))
        differ = [r for r, v in enumerate(seen) if v[0] != seen[0][0]]
        if differ:
            raise ConfigError(
                f"{what} must be the same on every rank; ranks {differ} differ from rank 0 "
                f"(this rank {self.rank} has {value!r})"
            )

    def broadcast_parameters(self, params: torch.nn.Module | Iterable[Any]) -> None:
        """Copy rank 0's tensors to every rank, in place.

        Args:
            params: A module (all its parameters and buffers) or an iterable of tensors (say
                ``policy.trainable_parameters()``: the frozen base loaded from the same
                checkpoint is already identical).
        """
        if isinstance(params, torch.nn.Module):
            tensors = [*params.parameters(), *params.buffers()]
        else:
            tensors = list(params)
        with torch.no_grad():
            for t in tensors:
                buf = t.detach().to(self._comm_device)
                tdist.broadcast(buf, src=0, group=self.group)
                if buf.data_ptr() != t.data_ptr():
                    t.copy_(buf)

    def all_reduce_gradients(self, params: Sequence[Any], *, bucket_mb: float = 25.0) -> None:
        """Sum every parameter's gradient over ranks, in place (float32 buckets).

        A parameter without a gradient on this rank (no rows here, or unused) counts as zero;
        one without a gradient on *every* rank keeps ``grad=None``, exactly as in one process.

        Args:
            params: The same parameters, in the same order, on every rank.
            bucket_mb: Largest bucket (float32), as DDP's ``bucket_cap_mb``.
        """
        params = list(params)
        present = self.all_reduce_sum([p.grad is not None for p in params]) > 0
        live = [p for p, used in zip(params, present, strict=True) if used]
        cap = max(1, int(bucket_mb * 2**20 / 4))
        start = 0
        while start < len(live):
            end, size = start, 0
            while end < len(live) and (end == start or size + live[end].numel() <= cap):
                size += live[end].numel()
                end += 1
            bucket = torch.zeros(size, dtype=torch.float32, device=self._comm_device)
            offset = 0
            for p in live[start:end]:
                if p.grad is not None:
                    bucket[offset : offset + p.numel()] = p.grad.detach().reshape(-1)
                offset += p.numel()
            tdist.all_reduce(bucket, op=tdist.ReduceOp.SUM, group=self.group)
            offset = 0
            for p in live[start:end]:
                part = bucket[offset : offset + p.numel()].view_as(p)
                if p.grad is None:
                    p.grad = part.to(device=p.device, dtype=p.dtype).clone()
                else:
                    p.grad.copy_(part)
                offset += p.numel()
            start = end

    def __repr__(self) -> str:
        return (
            f"DistContext(rank={self.rank}, world_size={self.world_size}, "
            f"device={str(self.device)!r}, backend={self.backend!r})"
        )


def _int_env(name: str) -> int:
    raw = os.environ[name]
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


def _check_backend(backend: str) -> None:
    if backend not in ("gloo", "nccl"):
        raise ConfigError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl" and not torch.cuda.is_available():
        raise ConfigError("backend 'nccl' needs CUDA, which is not available")
