"""Several switches, the links between them and the hosts on them: the description a job's tree comes from.

A `Topology` (topology.py) is one switch's world.  A `Fabric` is the whole
network, and `Fabric.topologies(jobs)` cuts it into one `Topology` per
switch, each holding that switch's share of every job (docs/design.md, "Aggregation trees";
docs/trees.md): its children's mask and members (hosts, or switches below
it, by member id), and its parents, one per root, so that slot s of a job
goes up to root s mod S.  The controller installs each share like any
topology, on the emulator or BMv2, so a tree may mix targets.

    {"switches": [{"name": "s1", "mac": "02:00:00:00:10:01", "ip": "10.0.1.1"}, ...],
     "hosts": [{"name": "h1", "mac": "02:00:00:00:01:01", "ip": "10.0.0.1", "switch": "l1", "port": 1}, ...],
     "links": [{"a": "l1", "a_port": 5, "b": "s1", "b_port": 1}, ...]}

A switch's member id in its parents' jobs is its index in `switches` (so at
most 32 switches).  The roots of a job are given, or by default: the one
switch all its workers hang on (a star), else every switch without hosts
(the spines).  Each root's tree is the shortest-path tree from it; a switch
must have the same children under every root it serves (true of a
leaf/spine fabric and of any tree), or the job is refused.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from hina.wire.frames import mac_bytes
from hina.wire.headers import MAX_WORKERS

from .config import MAX_PARENTS, JobConfig, Member
from .topology import Host, Topology


@dataclasses.dataclass(frozen=True)
class Node:
    """A switch of the fabric: its name and the address frames it emits carry."""

    name: str
    mac: str
    ip: str


@dataclasses.dataclass(frozen=True)
class Attached:
    """A host on a switch port."""

    name: str
    mac: str
    ip: str
    switch: str
    port: int


@dataclasses.dataclass(frozen=True)
class Link:
    """A cable between two switches' ports."""

    a: str
    a_port: int
    b: str
    b_port: int


@dataclasses.dataclass(frozen=True)
class TreeJob:
    """A job over the fabric: its workers (host names, in rank order) and, optionally, its roots."""

    job_id: int
    words: int
    slot_base: int
    slots: int
    workers: tuple[str, ...]
    roots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "workers", tuple(self.workers))
        object.__setattr__(self, "roots", tuple(self.roots))
        if len(set(self.workers)) != len(self.workers):
            raise ValueError(f"job {self.job_id}: a host appears twice among the workers")


@dataclasses.dataclass(frozen=True)
class Fabric:
    switches: tuple[Node, ...]
    hosts: tuple[Attached, ...]
    links: tuple[Link, ...] = ()

    def __post_init__(self) -> None:
        for f in ("switches", "hosts", "links"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        names = [s.name for s in self.switches] + [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("a name appears twice among the switches and hosts")
        if len(self.switches) > MAX_WORKERS:
            raise ValueError(f"at most {MAX_WORKERS} switches (a switch's index is its member id), "
                             f"got {len(self.switches)}")
        known = {s.name for s in self.switches}
        used = collections.Counter()
        for h in self.hosts:
            if h.switch not in known:
                raise ValueError(f"host {h.name} is on switch {h.switch!r}, which the fabric lacks")
            used[h.switch, h.port] += 1
        for ln in self.links:
            for sw, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
                if sw not in known:
                    raise ValueError(f"a link ends on switch {sw!r}, which the fabric lacks")
                used[sw, port] += 1
        twice = sorted(k for k, n in used.items() if n > 1)
        if twice:
            raise ValueError(f"ports used twice: {', '.join(f'{s} port {p}' for s, p in twice)}")
        macs = [n.mac.lower() for n in self.switches] + [h.mac.lower() for h in self.hosts]
        if len(set(macs)) != len(macs):
            raise ValueError("two nodes share a MAC address")
        for m in macs:
            mac_bytes(m)

    # -- shapes -----------------------------------------------------------------
    @classmethod
    def star(cls, hosts: int) -> Fabric:
        """One switch, hosts on ports 1..hosts."""
        return cls.leafspine(1, 0, hosts)

    @classmethod
    def leafspine(cls, leaves: int, spines: int, hosts_per_leaf: int) -> Fabric:
        """Leaves l1.. with hosts on ports 1..H, every leaf's port H+1+k cabled to spine k's port 1+l.
        Hosts are h1.. in leaf order, 10.0.0.i; switches 10.0.1.x, MACs 02:00:00:00:10:x."""
        if leaves < 1 or spines < 0 or hosts_per_leaf < 1 or (leaves > 1 and spines < 1):
            raise ValueError(f"a leaf/spine fabric needs leaves >= 1, hosts per leaf >= 1 and, with several "
                             f"leaves, spines >= 1: got {leaves}, {spines}, {hosts_per_leaf}")
        switches = [Node(f"l{i + 1}", f"02:00:00:00:10:{i + 1:02x}", f"10.0.1.{i + 1}") for i in range(leaves)]
        switches += [Node(f"s{k + 1}", f"02:00:00:00:10:{0x80 + k + 1:02x}", f"10.0.1.{128 + k + 1}")
                     for k in range(spines)]
        hosts = [Attached(f"h{i * hosts_per_leaf + p + 1}", f"02:00:00:00:01:{i * hosts_per_leaf + p + 1:02x}",
                          f"10.0.0.{i * hosts_per_leaf + p + 1}", f"l{i + 1}", p + 1)
                 for i in range(leaves) for p in range(hosts_per_leaf)]
        links = [Link(f"l{i + 1}", hosts_per_leaf + 1 + k, f"s{k + 1}", 1 + i)
                 for i in range(leaves) for k in range(spines)] if leaves > 1 else []
        return cls(tuple(switches), tuple(hosts), tuple(links))

    def switch(self, name: str) -> Node:
        try:
            return next(s for s in self.switches if s.name == name)
        except StopIteration:
            raise ValueError(f"no switch {name!r} in the fabric") from None

    def host(self, name: str) -> Attached:
        try:
            return next(h for h in self.hosts if h.name == name)
        except StopIteration:
            raise ValueError(f"no host {name!r} in the fabric") from None

    def member_id(self, switch: str) -> int:
        return [s.name for s in self.switches].index(switch)

    def neighbours(self, switch: str) -> list[tuple[int, str, int]]:
        """(my port, the other switch, its port) for each link of `switch`, by my port."""
        out = [(ln.a_port, ln.b, ln.b_port) for ln in self.links if ln.a == switch]
        out += [(ln.b_port, ln.a, ln.a_port) for ln in self.links if ln.b == switch]
        return sorted(out)

    # -- trees ------------------------------------------------------------------
    def roots(self, job: TreeJob) -> tuple[str, ...]:
        if job.roots:
            for r in job.roots:
                self.switch(r)
            return job.roots
        on = {self.host(w).switch for w in job.workers}
        if len(on) == 1:
            return (on.pop(),)
        spines = tuple(s.name for s in self.switches if not any(h.switch == s.name for h in self.hosts))
        if not spines:
            raise ValueError(f"job {job.job_id}: workers on several switches and no switch without hosts to "
                             f"root the tree at: name the roots")
        return spines

    def _tree(self, root: str) -> dict[str, tuple[str, int, int]]:
        """Shortest-path tree from `root`: switch -> (its parent, its port toward it, the parent's port)."""
        parent: dict[str, tuple[str, int, int]] = {}
        seen, queue = {root}, collections.deque([root])
        while queue:
            here = queue.popleft()
            for my_port, other, other_port in self.neighbours(here):
                if other not in seen:
                    seen.add(other)
                    parent[other] = (here, other_port, my_port)
                    queue.append(other)
        return parent

    def shares(self, job: TreeJob) -> dict[str, JobConfig]:
        """Each switch's share of `job`: members (its hosts by rank, the switches below it by member id),
        the children's mask and the parents (one per root, slot s going up to root s mod S)."""
        n = len(job.workers)
        if not 1 <= n <= MAX_WORKERS:
            raise ValueError(f"job {job.job_id}: 1..{MAX_WORKERS} workers, got {n}")
        roots = self.roots(job)
        if len(roots) > MAX_PARENTS:
            raise ValueError(f"job {job.job_id}: at most {MAX_PARENTS} roots, got {len(roots)}")
        where = {rank: self.host(w) for rank, w in enumerate(job.workers)}
        children: dict[str, set] = {}  # switch -> its children, the same under every root
        parents: dict[str, list[Member]] = collections.defaultdict(list)
        for root in roots:
            tree = self._tree(root)
            below = collections.defaultdict(set)  # switch -> (kind, id, port) children in this root's tree
            for rank, h in where.items():
                if h.switch != root and h.switch not in tree:
                    raise ValueError(f"job {job.job_id}: worker {rank} ({h.name}) cannot reach root {root}")
                below[h.switch].add(("host", rank, h.port))
                sw = h.switch
                while sw != root:  # the path up: each switch on it is a child of the next
                    up, my_port, up_port = tree[sw]
                    below[up].add(("switch", self.member_id(sw), up_port))
                    sw = up
            for sw, kids in below.items():
                if sw in children and children[sw] != kids:
                    raise ValueError(f"job {job.job_id}: switch {sw} has other children under root {root} than "
                                     f"under another root; give the job one root")
                children[sw] = kids
                if sw != root:
                    up, my_port, _ = tree[sw]
                    parents[sw].append(Member(self.member_id(sw), my_port))
                elif parents.get(sw):
                    raise ValueError(f"job {job.job_id}: switch {sw} is a root and below another root")
        out = {}
        for sw, kids in children.items():
            if parents.get(sw) and len(parents[sw]) != len(roots):
                raise ValueError(f"job {job.job_id}: switch {sw} roots some slots and sends others up")
            hosts_here = any(kind == "host" for kind, _, _ in kids)
            switches_here = any(kind == "switch" for kind, _, _ in kids)
            if hosts_here and switches_here:
                raise ValueError(f"job {job.job_id}: switch {sw} has both workers and switches below it")
            members = tuple(Member(i, port) for _, i, port in sorted(kids))
            mask = sum(1 << i for _, i, _ in kids)
            workers = n if hosts_here else len(self.switches)
            out[sw] = JobConfig(job.job_id, workers, job.words, job.slot_base, job.slots, members, mask=mask,
                                parents=tuple(parents.get(sw, ())))
        return out

    def topologies(self, jobs: list[TreeJob] | tuple[TreeJob, ...] = ()) -> dict[str, Topology]:
        """One `Topology` per switch: its hosts and neighbouring switches (as hosts: where it addresses
        frames), and its share of every job."""
        shares = collections.defaultdict(list)
        for job in jobs:
            for sw, cfg in self.shares(job).items():
                shares[sw].append(cfg)
        out = {}
        for s in self.switches:
            hosts = [Host(h.port, h.mac, h.ip) for h in self.hosts if h.switch == s.name]
            for my_port, other, _ in self.neighbours(s.name):
                o = self.switch(other)
                hosts.append(Host(my_port, o.mac, o.ip, switch=True))  # never flooded to: no loops
            out[s.name] = Topology(s.mac, s.ip, tuple(sorted(hosts, key=lambda h: h.port)), tuple(shares[s.name]))
        return out

    # -- serialization ------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        return {"switches": [dataclasses.asdict(s) for s in self.switches],
                "hosts": [dataclasses.asdict(h) for h in self.hosts],
                "links": [dataclasses.asdict(ln) for ln in self.links]}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Fabric:
        if not isinstance(cfg, dict):
            raise ValueError("a fabric is a JSON object with switches, hosts and links")
        unknown = set(cfg) - {"switches", "hosts", "links"}
        if unknown:
            raise ValueError(f"unknown fabric fields: {', '.join(sorted(unknown))}")
        try:
            return cls(tuple(Node(str(s["name"]), s["mac"], s["ip"]) for s in cfg["switches"]),
                       tuple(Attached(str(h["name"]), h["mac"], h["ip"], str(h["switch"]), int(h["port"]))
                             for h in cfg["hosts"]),
                       tuple(Link(str(ln["a"]), int(ln["a_port"]), str(ln["b"]), int(ln["b_port"]))
                             for ln in cfg.get("links", ())))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a fabric entry lacks a field or has a wrong type: {exc}") from None
