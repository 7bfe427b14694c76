"""Tests of nntile_spmd.runtime.threads (plain pytest; COMM_WORLD may be of size 1)."""

import numba
import numpy  # noqa: F401  (loads the BLAS library that threadpoolctl limits)
import pytest
import threadpoolctl
from mpi4py import MPI

from nntile_spmd.runtime import threads


class FakeNodeComm:
    """A node communicator of `size` ranks whose CPU masks are `masks`."""

    def __init__(self, size, masks, rank=0):
        self.size, self.masks, self.rank = size, masks, rank
        self.freed = False

    def Get_size(self):
        return self.size

    def Get_rank(self):
        return self.rank

    def allgather(self, value):
        return self.masks

    def Free(self):
        self.freed = True


class FakeComm:
    """A communicator whose shared-memory split returns a given FakeNodeComm."""

    def __init__(self, node):
        self.node = node

    def Split_type(self, split_type):
        assert split_type == MPI.COMM_TYPE_SHARED
        return self.node


@pytest.fixture
def restore_threads(monkeypatch):
    """Undo the BLAS/numba limits a test sets; start without the env override."""
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    numba_before = numba.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=None):
        yield
    numba.set_num_threads(numba_before)


def blas_threads():
    """Return the thread counts of the loaded BLAS libraries."""
    return {lib["num_threads"] for lib in threadpoolctl.threadpool_info()
            if lib["user_api"] == "blas"}


def test_world_size_one_defaults():
    comm = MPI.COMM_WORLD
    if comm.Get_size() != 1:
        pytest.skip("needs a single-rank COMM_WORLD")
    assert threads.ranks_per_node(comm) == 1
    assert threads.local_rank(comm) == 0
    assert threads.default_blas_threads(comm) == threads.usable_cores()


def test_default_is_cores_over_ranks_per_node():
    comm = MPI.COMM_WORLD
    expected = max(1, threads.usable_cores() // threads.ranks_per_node(comm))
    assert threads.default_blas_threads(comm) == expected
    assert threads.default_blas_threads(comm) >= 1


@pytest.mark.parametrize("size, masks, expected", [
    (1, [set(range(8))], 8),
    (3, [set(range(8))] * 3, 2),                 # unbound ranks share 8 cores
    (4, [{0}] * 4, 1),                           # never below 1
    (3, [{0, 1}, {2, 3}, {4, 5}], 2),            # ranks pinned to disjoint cores
    (2, [{0, 1, 2}, {2, 3, 4, 5}], 3),           # overlapping masks: union of 6
])
def test_default_blas_threads_arithmetic(size, masks, expected):
    node = FakeNodeComm(size, masks)
    assert threads.default_blas_threads(FakeComm(node)) == expected
    assert node.freed


def test_ranks_per_node_and_local_rank_use_shared_split():
    node = FakeNodeComm(4, [], rank=3)
    assert threads.ranks_per_node(FakeComm(node)) == 4
    assert threads.local_rank(FakeComm(node)) == 3
    assert node.freed


def test_configure_uses_default(restore_threads):
    comm = MPI.COMM_WORLD
    used = threads.configure_blas_threads(comm)
    assert used == threads.default_blas_threads(comm)
    assert numba.get_num_threads() == min(used, numba.config.NUMBA_NUM_THREADS)


def test_env_overrides_default(restore_threads, monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    assert threads.configure_blas_threads(MPI.COMM_WORLD) == 1
    assert blas_threads() <= {1}
    assert numba.get_num_threads() == 1
    assert threads._BLAS_LIMITER is not None


def test_explicit_threads_beat_env(restore_threads, monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    assert threads.configure_blas_threads(MPI.COMM_WORLD, threads=2) == 2
    assert blas_threads() <= {2}


def test_numba_threads_capped_by_pool(restore_threads):
    pool = numba.config.NUMBA_NUM_THREADS
    assert threads.configure_blas_threads(MPI.COMM_WORLD, threads=pool + 3) == pool + 3
    assert numba.get_num_threads() == pool


@pytest.mark.parametrize("value", ["0", "-2", "abc"])
def test_bad_env_value_raises(restore_threads, monkeypatch, value):
    monkeypatch.setenv(threads.THREADS_ENV, value)
    with pytest.raises(ValueError, match=threads.THREADS_ENV):
        threads.configure_blas_threads(MPI.COMM_WORLD)


def test_empty_env_value_means_unset(monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, " ")
    assert threads.threads_from_env() is None


def test_gpu_for_rank():
    assert [threads.gpu_for_rank(r, 4) for r in range(6)] == [0, 1, 2, 3, 0, 1]
    assert threads.gpu_for_rank(3, 1) == 0
    with pytest.raises(ValueError):
        threads.gpu_for_rank(0, 0)


def test_compile_selects_the_device_by_node_local_rank(monkeypatch, restore_threads):
    """compile() asks the shared-memory split for this rank's place on its node and
    hands that (not the global rank) to the GPU choice, with the policy's preferred GPUs."""
    import nntile_spmd as nt
    from nntile_spmd.runtime import mpi_world
    node = FakeNodeComm(4, [set(range(4))] * 4, rank=3)
    monkeypatch.setattr(threads, "_node_comm", lambda comm: node)
    chosen = []
    real_select = mpi_world.select_device
    monkeypatch.setattr(mpi_world, "select_device",
                        lambda device, rank, gpus: chosen.append((rank, gpus))
                        or real_select("cpu", rank))
    g = nt.LogicalGraph("g")
    nt.ops.relu(g.tensor([2], "x", external=True), "y").mark_output()
    nt.compile(g)   # comm=None: the real MPI world (of one rank without mpiexec)
    nt.compile(g, policy=nt.ExecutionPolicy(preferred_gpus=[1, 0]))
    assert chosen == [(3, None), (3, (1, 0))]



@pytest.mark.parametrize("size, masks, crowded", [
    (2, [{0, 1}] * 2, False),                    # one core each
    (3, [{0, 1}] * 3, True),                     # three ranks on two cores
    (4, [{0}, {1}, {0}, {1}], True),             # bound, still two cores for four
    (3, [{0, 1}, {2, 3}, {4, 5}], False),
])
def test_ranks_outnumber_cores_counts_the_union_of_the_masks(size, masks, crowded):
    node = FakeNodeComm(size, masks)
    assert threads.ranks_outnumber_cores(FakeComm(node)) is crowded
    assert node.freed
