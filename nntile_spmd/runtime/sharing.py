"""Runtime layer: persistent tensors shared between compiled graphs on one world.

The seed's training loop (§10.4.3) runs three graphs, forward + loss, backward and
optimizer, over the same parameters and gradients. `cg_b.share_tensors(cg_a, names)`
makes graph B's tiles of `names` the very buffers of graph A (no copy): each rank's
tile store maps the same key to the same array. An execute may replace a tile's
array by a new version (the executor stores its slots back), so after every execute
(failed ones too) the graph hands its current arrays of the shared tiles to every
graph linked to it, directly or through others: the next execute of any of them, a
bind, or a get_output sees what the last one wrote, with no bind in between. A shared
tensor counts as bound in both graphs: its values are whatever either graph last
wrote (zeros, as allocated, before any write).

Only persistent tensors are shared: the tiles of any other tensor are freed or
rebound between executes. Both graphs are compiled on one world (under MPI, on
communicators of the same processes in the same order) and both plans tile and place
the tensor alike (shape, dtype, tile grid and every tile's holders), so that each rank
holds the same tiles in both. Memory: each graph's store counts a shared buffer (an
exchange of one array for another of the same bytes), so each graph's measured bytes
still equal its plan's; the process holds the buffer once, and a sum of the graphs'
figures counts it once per graph. CompiledGraph.execute returns when its program is
done, so compiled graphs run one at a time; the seed API's ExecutableGraphs that share
run their asynchronous programs in the order started (seed_api/asynchronous.py).
"""

from __future__ import annotations


def share_tensors(cg, other, names) -> None:
    """Make `cg`'s tiles of `names` the buffers of `other` (checked first, all or none)."""
    names = [names] if isinstance(names, str) else list(names)
    if other is cg:
        raise ValueError("share_tensors: a graph shares tensors with another graph, "
                         f"not with itself ({cg.graph.name!r})")
    if not same_world(cg.world, other.world):
        raise ValueError(f"share_tensors: graphs {cg.graph.name!r} and {other.graph.name!r} "
                         "were compiled on different worlds; compile both with the same comm")
    for name in names:
        check_shareable(cg, other, name)
    for rank, store in cg.stores.items():
        source = other.stores[rank].tiles
        for name in names:
            for coord in cg.plan.tilings[name].coords():
                key = (name, coord)
                if key in cg.plan.permanent[rank]:
                    store.tiles[key] = source[key]   # same bytes: the count stays right
    for name in names:   # the values are the other graph's: bound where either was
        for graph in (cg, other):
            graph.bound[name] = set(graph.stores)
    cg.links.append((other, frozenset(names)))
    other.links.append((cg, frozenset(names)))


def same_world(world, other) -> bool:
    """The same world object, or MPI worlds of the same processes in the same order."""
    return world is other or getattr(world, "same_ranks", lambda _: False)(other)


def check_shareable(cg, other, name) -> None:
    """Raise ValueError naming `name` and what differs between the two plans."""
    where = f"share_tensors {name!r} of graphs {cg.graph.name!r} and {other.graph.name!r}"
    for graph in (cg, other):
        if not graph.graph.has_tensor(name):
            raise ValueError(f"{where}: graph {graph.graph.name!r} has no tensor {name!r}")
        tensor = graph.graph.get_tensor(name)
        if not tensor.persistent:
            raise ValueError(f"{where}: in graph {graph.graph.name!r} {tensor.describe()} is "
                             "not persistent (its tiles do not live between executes)")
        if graph.plan.policy is not None:
            raise ValueError(f"{where}: graph {graph.graph.name!r} plans offloading; sharing "
                             "tensors with an offloading plan is not built")
    mine, theirs = cg.graph.get_tensor(name), other.graph.get_tensor(name)
    differences = [
        (what, a, b) for what, a, b in (
            ("shape", list(mine.shape), list(theirs.shape)),
            ("dtype", mine.dtype, theirs.dtype),
            ("tiling", cg.plan.tilings[name], other.plan.tilings[name]),
            ("tile holders", holders(cg.plan, name), holders(other.plan, name)))
        if a != b]
    if differences:
        what, a, b = differences[0]
        raise ValueError(f"{where}: the {what} differs ({a} in {cg.graph.name!r}, {b} in "
                         f"{other.graph.name!r}); plan the tensor alike in both graphs")


def holders(plan, name) -> list:
    """Per tile, in tile order, the ranks that hold it."""
    return [tuple(plan.ranks_of_owner(int(plan.owners[name][coord])))
            for coord in plan.tilings[name].coords()]


def push_shared(cg) -> None:
    """Hand `cg`'s current arrays of its shared tiles to every graph linked to it,
    directly or through others (after an execute, which may have replaced them)."""
    visited = {id(cg)}
    pending = [(cg, peer, names) for peer, names in cg.links]
    while pending:
        source, peer, names = pending.pop()
        if id(peer) in visited:
            continue
        visited.add(id(peer))
        for rank, store in peer.stores.items():
            tiles = source.stores[rank].tiles
            for key in [key for key in tiles if key[0] in names]:
                store.tiles[key] = tiles[key]
        pending += [(peer, onward, names & onward_names)
                    for onward, onward_names in peer.links if names & onward_names]
