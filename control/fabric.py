"""Several switches, the links between them and the hosts on them: the description a job's tree comes from.

A `Topology` (topology.py) is one switch's world.  A `Fabric` is the whole
network, and `Fabric.topologies(jobs)` cuts it into one `Topology` per
switch, each holding that switch's share of every job (docs/design.md, "Aggregation trees";
docs/trees.md): its children's mask and members (hosts, or switches below
it, by member id), and its parents, one per root, so that slot s of a job
goes up to root s mod S.  The controller installs each share like any
topology, on the emulator or BMv2, so a tree may mix targets.

A fabric is written as a topology file (docs/trees.md, "Topology files", lists every field;
mininet/topologies/ holds examples):

    {"switches": [{"name": "l1"}, {"name": "l2"}, {"name": "s1", "target": "bmv2"}],
     "hosts": [{"name": "h1", "switch": "l1"}, {"name": "h2", "switch": "l2"}],
     "links": [{"a": "l1", "b": "s1"}, {"a": "l2", "b": "s1", "rate": 100}],
     "oversubscription": 4}

Ports, MACs and IPs may be left out (the lowest free port; addresses by position).  A fabric
is checked whole when made, each fault a one-line ValueError naming the field and the fix
("topology hosts[3].switch: no switch named 'l9' (switches are l1, l2, s1)").  It must be a
tree of switches with the hosts at the bottom, or several such trees that differ only in
their roots (leaf/spine: slot s rooted at spine s mod S).  The roots of a job over every host
are `roots` if named, else the one switch holding hosts, else the top tier: the switches
farthest from the hosts (tier 1 holds hosts, tier k + 1 is linked to tier k), so that a
three-tier tree is rooted at its core unasked.  Each root's tree is its shortest-path tree; a
switch must have the same children under every root, a switch with hosts no switch below it,
and every switch and link must lie on some host's way up to a root (else no host reaches the
switch, or the link closes a cycle).  Links are oriented when made: `a` is the lower end.  A
switch's member id in its parents' jobs is its index in `switches` (so at most 32 switches).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Any

from hina.wire.frames import ip_bytes, mac_bytes
from hina.wire.headers import MAX_WORKERS

from .config import MAX_PARENTS, JobConfig, Member
from .ledger import DEFAULT_POLICY, DEFAULT_SPACE, Held, Placement, choose, describe
from .topology import Host, Topology

TARGETS = ("emulator", "bmv2")  # what a switch may run; None: the run's choice (mininet/run.py --switch)
MAX_PORT = 510  # 511 is BMv2's drop port


def _fail(where: str, why: str) -> ValueError:
    """The one-line error of a topology: the field, what is wrong with it, the fix."""
    return ValueError(f"topology {where}: {why}" if where else f"topology: {why}")


def _names(names) -> str:
    names = list(names)
    return ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")


def _positive(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, int | float) and 0 < x < math.inf


class _Refused(ValueError):
    """A tree the roots cannot make: the message gains the fix (`fix`, and which roots would do)."""

    def __init__(self, message: str, fix: str = ""):
        super().__init__(message)
        self.fix = fix


@dataclasses.dataclass(frozen=True)
class Node:
    """A switch of the fabric: its name, the address frames it emits carry, and its target ("emulator" or
    "bmv2"; None: whatever the run chooses)."""

    name: str
    mac: str
    ip: str
    target: str | None = None


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
    """A cable between two switches' ports (`a` the lower end once a fabric holds it), optionally with its
    rate in Mbit/s or its oversubscription (mininet/topo.py's `uplink_rate`)."""

    a: str
    a_port: int
    b: str
    b_port: int
    rate: float | None = None
    oversubscription: float | None = None


@dataclasses.dataclass(frozen=True)
class TreeJob:
    """A job over the fabric: its workers (host names, in rank order) and, optionally, its roots.  slot_base
    None: the same free range on every switch of its tree, chosen by `Fabric.place`."""

    job_id: int
    words: int
    slot_base: int | None
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
    """Switches, hosts (on a switch port, in rank order) and links; optionally the roots of a job over every
    host (default: the one switch holding hosts, else the top tier), the oversubscription of the links
    that name neither rate nor oversubscription, and a description.  Checked whole when made."""

    switches: tuple[Node, ...]
    hosts: tuple[Attached, ...]
    links: tuple[Link, ...] = ()
    roots: tuple[str, ...] = ()
    oversubscription: float | None = None
    description: str = ""

    def __post_init__(self) -> None:
        for f in ("switches", "hosts", "links", "roots"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        self._check_fields()
        self._check_joined()
        top = self.roots or self._top_tier()
        where = dict(enumerate(self.hosts))
        how = "as named" if self.roots else ("the one switch holding hosts" if len(top) == 1 and top[0] in
                                             self._holding() else "the top tier, as none are named")
        if len(top) > MAX_PARENTS:
            raise _fail(f"roots ({_names(top)}: {how})", f"at most {MAX_PARENTS} (a switch spreads its slots over at "
                                                         f"most {MAX_PARENTS} parents), got {len(top)}; name at most "
                                                         f"{MAX_PARENTS} in roots")
        try:
            children, _, crossed = self._walk(top, where, f"topology roots ({', '.join(top)}: {how})")
        except _Refused as exc:
            raise ValueError(f"{exc}; {exc.fix + ', or ' if exc.fix else ''}{self._roots_fix()}") from None
        self._check_used(top, children, crossed)
        object.__setattr__(self, "links", tuple(
            ln if (ln.a, ln.a_port, ln.b, ln.b_port) in crossed
            else dataclasses.replace(ln, a=ln.b, a_port=ln.b_port, b=ln.a, b_port=ln.a_port) for ln in self.links))
        object.__setattr__(self, "_top", top)  # not fields: derived, never compared
        object.__setattr__(self, "_children", children)

    # -- checks -------------------------------------------------------------------
    def _holding(self) -> list[str]:
        """The switches holding hosts, in switch order."""
        on = {h.switch for h in self.hosts}
        return [s.name for s in self.switches if s.name in on]

    def _check_fields(self) -> None:
        """Each field on its own: names, addresses, targets, ports, rates, roots."""
        if not self.switches:
            raise _fail("switches", "none given; a topology needs at least one switch")
        if len(self.switches) > MAX_WORKERS:
            raise _fail("switches", f"at most {MAX_WORKERS} (a switch's index is its member id in its parents' "
                                    f"jobs), got {len(self.switches)}")
        if not self.hosts:
            raise _fail("hosts", "none given; a topology needs at least one host on a switch")
        nodes = [(f"switches[{i}]", s) for i, s in enumerate(self.switches)]
        nodes += [(f"hosts[{i}]", h) for i, h in enumerate(self.hosts)]
        named: dict[str, str] = {}
        macs: dict[str, str] = {}
        for where, n in nodes:
            if not isinstance(n.name, str) or not n.name or any(c.isspace() for c in n.name):
                raise _fail(f"{where}.name", f"must be a name without spaces, got {n.name!r}")
            if n.name in named:
                raise _fail(f"{where}.name", f"{n.name!r} is taken by {named[n.name]}; give every switch and host "
                                             f"its own name")
            named[n.name] = where
            for field, check in (("mac", mac_bytes), ("ip", ip_bytes)):
                try:
                    check(getattr(n, field))
                except (ValueError, TypeError, AttributeError):
                    what = "a MAC address such as 02:00:00:00:10:01" if field == "mac" else "an IPv4 address"
                    raise _fail(f"{where}.{field}", f"must be {what}, got {getattr(n, field)!r} (or leave it "
                                                    f"out: one is given by position)") from None
            if n.mac.lower() in macs:
                raise _fail(f"{where}.mac", f"{n.mac} is also {macs[n.mac.lower()]}'s; give every switch and host "
                                            f"its own (or leave it out)")
            macs[n.mac.lower()] = where
        known = [s.name for s in self.switches]
        for i, s in enumerate(self.switches):
            if s.target not in (None, *TARGETS):
                raise _fail(f"switches[{i}].target", f"must be emulator or bmv2, got {s.target!r} (or leave it "
                                                     f"out: the run's --switch, --spine-switch above the leaves)")
        used: dict[tuple[str, int], str] = {}

        def port(where: str, switch: str, p: Any) -> None:
            if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= MAX_PORT:
                raise _fail(where, f"must be a port number 1..{MAX_PORT}, got {p!r} (or leave it out: the "
                                   f"switch's lowest free port)")
            if (switch, p) in used:
                raise _fail(where, f"ports used twice: {switch} port {p} is also {used[switch, p]}'s; give it a "
                                   f"free port (or leave it out)")
            used[switch, p] = where.rpartition(".")[0]

        for i, h in enumerate(self.hosts):
            if h.switch not in known:
                raise _fail(f"hosts[{i}].switch", f"no switch named {h.switch!r} (switches are {_names(known)})")
            port(f"hosts[{i}].port", h.switch, h.port)
        for i, ln in enumerate(self.links):
            for end in ("a", "b"):
                if getattr(ln, end) not in known:
                    raise _fail(f"links[{i}].{end}", f"no switch named {getattr(ln, end)!r} "
                                                     f"(switches are {_names(known)})")
            if ln.a == ln.b:
                raise _fail(f"links[{i}]", f"joins {ln.a} to itself; a link joins two switches")
            port(f"links[{i}].a_port", ln.a, ln.a_port)
            port(f"links[{i}].b_port", ln.b, ln.b_port)
            if ln.rate is not None and not _positive(ln.rate):
                raise _fail(f"links[{i}].rate", f"must be a positive number of Mbit/s, got {ln.rate!r} (or leave "
                                                f"it out: the rate follows from --bw and the oversubscription)")
            if ln.oversubscription is not None and not _positive(ln.oversubscription):
                raise _fail(f"links[{i}].oversubscription", f"must be a positive ratio (4 for 4:1), got "
                                                            f"{ln.oversubscription!r} (or leave it out)")
            if ln.rate is not None and ln.oversubscription is not None:
                raise _fail(f"links[{i}]", "gives both rate and oversubscription; keep one (rate: the link's Mbit/s; "
                                           "oversubscription: derived from the hosts' rate)")
        if self.oversubscription is not None and not _positive(self.oversubscription):
            raise _fail("oversubscription", f"must be a positive ratio (4 for 4:1), got {self.oversubscription!r} "
                                            f"(or leave it out: --oversubscription)")
        if not isinstance(self.description, str):
            raise _fail("description", f"must be a string, got {self.description!r}")
        for i, r in enumerate(self.roots):
            if r not in known:
                raise _fail(f"roots[{i}]", f"no switch named {r!r} (switches are {_names(known)})")
            if r in self.roots[:i]:
                raise _fail(f"roots[{i}]", f"{r} is named twice; name each root once")
        if len(self.roots) > MAX_PARENTS:
            raise _fail("roots", f"at most {MAX_PARENTS} (a switch spreads its slots over at most {MAX_PARENTS} "
                                 f"parents), got {len(self.roots)}")

    def _check_joined(self) -> None:
        """No link between two leaves, and every switch joined to the hosts."""
        holding = self._holding()
        for i, ln in enumerate(self.links):
            if ln.a in holding and ln.b in holding:
                above = " and add a switch above the leaves, linked to each" * (len(holding) == len(self.switches))
                raise _fail(f"links[{i}]", f"joins {ln.a} and {ln.b}, which both hold hosts: a switch with hosts is "
                                           f"a leaf, linked only to switches above it; remove the link{above}")
        joined = {holding[0]}
        queue = collections.deque(holding[:1])
        while queue:
            for _, other, _ in self.neighbours(queue.popleft()):
                if other not in joined:
                    joined.add(other)
                    queue.append(other)
        for j, s in enumerate(self.switches):
            if s.name not in joined and s.name in holding:
                if len(holding) == len(self.switches):
                    raise _fail("roots", f"none to be found: hosts hang on {_names(holding)} and no switch without "
                                         f"hosts lies above them; add one to switches and link each of them to it "
                                         f"(links)")
                raise _fail(f"switches[{j}] ({s.name!r})", f"its hosts cannot reach those on {holding[0]}: no links "
                                                           f"join them; link {s.name} to a switch above (links)")
            if s.name not in joined:
                raise _fail(f"switches[{j}] ({s.name!r})", "no host can reach it: no link joins it to the switches "
                                                           "holding hosts; link it (links) or remove it")

    def _levels(self) -> dict[str, int]:
        """Each switch's distance from the hosts: 1 holds hosts, k + 1 is linked to k (and not less)."""
        level = dict.fromkeys(self._holding(), 1)
        queue = collections.deque(level)
        while queue:
            here = queue.popleft()
            for _, other, _ in self.neighbours(here):
                if other not in level:
                    level[other] = level[here] + 1
                    queue.append(other)
        return level

    def _top_tier(self) -> tuple[str, ...]:
        """The default roots: the one switch holding hosts, else the switches farthest from the hosts (tier 1
        holds hosts, tier k + 1 is linked to tier k)."""
        holding = self._holding()
        if len(holding) == 1:
            return tuple(holding)
        level = self._levels()
        top = max(level.values())
        return tuple(s.name for s in self.switches if level[s.name] == top)

    def _roots_fix(self) -> str:
        """What to name as `roots` when the default or named ones make no tree: the single switches that do."""
        where = dict(enumerate(self.hosts))
        level = self._levels()
        fits = []
        for s in sorted(self.switches, key=lambda s: -level.get(s.name, 0)):  # the highest first
            try:
                self._walk((s.name,), where, "")
            except ValueError:
                continue
            fits.append(f'["{s.name}"]')
        if not fits:
            return 'name the switches at the top of the tree in "roots"'
        return f'set "roots" to one switch: {fits[0]}' + (f" (or {', '.join(fits[1:4])})" if len(fits) > 1 else "")

    def _check_used(self, top: tuple[str, ...], children: dict, crossed: set) -> None:
        """Every switch and link on some host's way up to a root."""
        for j, s in enumerate(self.switches):
            if s.name not in children:
                raise _fail(f"switches[{j}] ({s.name!r})", f"no host can reach it: it lies on no host's way up to "
                                                           f"the roots ({', '.join(top)}); remove it, or link it "
                                                           f"between the hosts and a root")
        for i, ln in enumerate(self.links):
            if not {(ln.a, ln.a_port, ln.b, ln.b_port), (ln.b, ln.b_port, ln.a, ln.a_port)} & crossed:
                raise _fail(f"links[{i}] ({ln.a} port {ln.a_port} - {ln.b} port {ln.b_port})",
                            f"closes a cycle: {ln.a} and {ln.b} reach the roots ({', '.join(top)}) another way, so "
                            f"no partial crosses it; remove it")

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
    @property
    def top(self) -> tuple[str, ...]:
        """The roots of a job over every host: `roots` if named, else the one switch holding hosts, else the
        top tier (the switches farthest from the hosts)."""
        return self._top

    def roots_of(self, job: TreeJob) -> tuple[str, ...]:
        """A job's roots: its own, else the one switch all its workers hang on, else the fabric's `top`."""
        if job.roots:
            for r in job.roots:
                self.switch(r)
            return job.roots
        on = {self.host(w).switch for w in job.workers}
        if len(on) == 1:
            return (on.pop(),)
        return self.top

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

    def _walk(self, roots: tuple[str, ...], where: dict[int, Attached], who: str) -> tuple[dict, dict, set]:
        """Each root's shortest-path tree, cut to the ways up from the workers' switches (`where`: rank ->
        host): every switch's children (("host", rank, port) or ("switch", member id, port)), the same under
        every root; its parents, one per root (`Member`: its member id, its port toward that root's tree);
        and the links those ways cross, as (lower, its port, upper, its port).  One-line ValueErrors, a
        `_Refused` where the roots cannot make the tree."""
        children: dict[str, set] = {}
        first: dict[str, str] = {}  # switch -> the root whose tree gave it its children first
        parents: dict[str, list[Member]] = collections.defaultdict(list)
        under: dict[str, list[str]] = collections.defaultdict(list)  # switch -> the roots it sends up to
        crossed: set[tuple[str, int, str, int]] = set()
        for root in roots:
            tree = self._tree(root)
            below = collections.defaultdict(set)  # switch -> its children in this root's tree
            for rank, h in where.items():
                if h.switch != root and h.switch not in tree:
                    raise ValueError(f"{who}: worker {rank} ({h.name}) cannot reach root {root}")
                below[h.switch].add(("host", rank, h.port))
                sw = h.switch
                while sw != root:  # the way up: each switch on it is a child of the next
                    up, my_port, up_port = tree[sw]
                    if up in roots and up != root:
                        raise _Refused(f"{who}: {sw} reaches root {root} only through root {up}",
                                       f"link {sw} to {root}")
                    below[up].add(("switch", self.member_id(sw), up_port))
                    crossed.add((sw, my_port, up, up_port))
                    sw = up
            for sw, kids in below.items():
                if sw in children and children[sw] != kids:
                    raise _Refused(f"{who}: switch {sw} has other children under root {root} than under root "
                                   f"{first[sw]}")
                children[sw] = kids
                first.setdefault(sw, root)
                if sw != root:
                    parents[sw].append(Member(self.member_id(sw), tree[sw][1]))
                    under[sw].append(root)
        for sw, kids in children.items():
            if sw in roots and under.get(sw):
                raise _Refused(f"{who}: switch {sw} is a root and below another root ({under[sw][0]})")
            if under.get(sw) and len(under[sw]) != len(roots):
                missed = next(r for r in roots if r not in under[sw])
                raise _Refused(f"{who}: switch {sw} sends slots up to root {under[sw][0]} but lies on no worker's "
                               f"way up to root {missed}")
            if len({kind for kind, _, _ in kids}) > 1:
                names = sorted(self.switches[i].name for kind, i, _ in kids if kind == "switch")
                raise _Refused(f"{who}: switch {sw} would have both workers and switches ({', '.join(names)}) "
                               f"below it; a switch with hosts is a leaf")
        return children, parents, crossed

    def shares(self, job: TreeJob) -> dict[str, JobConfig]:
        """Each switch's share of `job`: members (its hosts by rank, the switches below it by member id),
        the children's mask and the parents (one per root, slot s going up to root s mod S)."""
        n = len(job.workers)
        if not 1 <= n <= MAX_WORKERS:
            raise ValueError(f"job {job.job_id}: 1..{MAX_WORKERS} workers, got {n}")
        roots = self.roots_of(job)
        if len(roots) > MAX_PARENTS:
            raise ValueError(f"job {job.job_id}: at most {MAX_PARENTS} roots, got {len(roots)}")
        where = {rank: self.host(w) for rank, w in enumerate(job.workers)}
        try:
            children, parents, _ = self._walk(roots, where, f"job {job.job_id}")
        except _Refused as exc:
            raise ValueError(f"{exc}; {exc.fix + ', or ' if exc.fix else ''}give the job one root (TreeJob roots)") \
                from None
        out = {}
        for sw, kids in children.items():
            hosts_here = any(kind == "host" for kind, _, _ in kids)
            members = tuple(Member(i, port) for _, i, port in sorted(kids))
            mask = sum(1 << i for _, i, _ in kids)
            workers = n if hosts_here else len(self.switches)
            out[sw] = JobConfig(job.job_id, workers, job.words, job.slot_base, job.slots, members, mask=mask,
                                parents=tuple(parents.get(sw, ())))
        return out

    def place(self, jobs: list[TreeJob] | tuple[TreeJob, ...], *, space: int = DEFAULT_SPACE,
              policy: str = DEFAULT_POLICY) -> list[TreeJob]:
        """The jobs, each without a slot range (slot_base None) given one in order: the lowest range of its
        `slots` (capped by `policy`) free on every switch of its tree (`hina.control.ledger.choose`), beside
        the jobs with ranges of their own and those placed before it.  A ValueError names the job, its
        switches and what they hold when none is free."""
        held: dict[str, list[Held]] = collections.defaultdict(list)
        spans = {}
        for job in jobs:  # the switches each job's tree crosses (its range does not change them)
            spans[job.job_id] = tuple(self.shares(dataclasses.replace(job, slot_base=job.slot_base or 0)))
            if job.slot_base is not None:
                for sw in spans[job.job_id]:
                    held[sw].append(Held(job.job_id, job.slot_base, job.slots, len(job.workers)))
        out = []
        for job in jobs:
            if job.slot_base is None:
                beside = [h for sw in spans[job.job_id] for h in held[sw]]
                got = choose(Placement(job.slots), len(job.workers), beside, space, policy)
                if got is None:
                    raise ValueError(f"job {job.job_id}: no range of {job.slots} slots is free on every switch of "
                                     f"its tree ({', '.join(sorted(spans[job.job_id]))}, {space} slots each); held: "
                                     f"{describe(beside)}")
                job = dataclasses.replace(job, slot_base=got[0], slots=got[1])
                for sw in spans[job.job_id]:
                    held[sw].append(Held(job.job_id, job.slot_base, job.slots, len(job.workers)))
            out.append(job)
        return out

    def topologies(self, jobs: list[TreeJob] | tuple[TreeJob, ...] = ()) -> dict[str, Topology]:
        """One `Topology` per switch: its hosts and neighbouring switches (as hosts: where it addresses
        frames), and its share of every job (those without a slot range placed first: `place`)."""
        shares = collections.defaultdict(list)
        if any(job.slot_base is None for job in jobs):
            jobs = self.place(jobs)
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

    # -- the tree of a job over every host ------------------------------------------
    def tiers(self) -> dict[str, int]:
        """Each switch's tier in the tree of a job over every host: 1 holds hosts, else one above its highest
        child (a leaf/spine fabric has 2 tiers, a three-tier tree 3)."""
        out: dict[str, int] = {}

        def tier(sw: str) -> int:
            if sw not in out:
                kids = self._children[sw]
                out[sw] = 1 if any(kind == "host" for kind, _, _ in kids) else \
                    1 + max(tier(self.switches[i].name) for _, i, _ in kids)
            return out[sw]

        return {s.name: tier(s.name) for s in self.switches}

    def hosts_under(self, switch: str) -> int:
        """How many hosts the tree of a job over every host has below `switch`."""
        return sum(1 if kind == "host" else self.hosts_under(self.switches[i].name)
                   for kind, i, _ in self._children[switch])

    def uplinks(self, switch: str) -> tuple[Link, ...]:
        """The links up from `switch` (toward the roots: it is their `a`)."""
        return tuple(ln for ln in self.links if ln.a == switch)

    @property
    def is_tree(self) -> bool:
        """No cycle among the switches (one root's tree; not several spines): what plain bridges, which run
        no spanning tree, can carry without looping."""
        return len(self.links) == len(self.switches) - 1

    def describe(self) -> str:
        """One line: the hosts, the tiers and the roots."""
        tiers = self.tiers()
        levels = []
        for t in range(1, max(tiers.values()) + 1):
            names = [s for s, k in tiers.items() if k == t]
            if t == 1:
                names = [f"{s} ({self.hosts_under(s)} host{'s' if self.hosts_under(s) > 1 else ''})" for s in names]
            levels.append(f"tier {t}: {', '.join(names)}")
        return (f"{len(self.hosts)} hosts under {len(levels)} tier{'s' if len(levels) > 1 else ''} of switches, "
                f"rooted at {', '.join(self.top)}; " + "; ".join(levels))

    # -- serialization ------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        """The topology file's JSON, every port and address written out (links oriented: `a` below)."""
        cfg: dict[str, Any] = {"description": self.description} if self.description else {}
        cfg["switches"] = [{k: v for k, v in dataclasses.asdict(s).items() if v is not None} for s in self.switches]
        cfg["hosts"] = [dataclasses.asdict(h) for h in self.hosts]
        cfg["links"] = [{k: v for k, v in dataclasses.asdict(ln).items() if v is not None} for ln in self.links]
        if self.roots:
            cfg["roots"] = list(self.roots)
        if self.oversubscription is not None:
            cfg["oversubscription"] = self.oversubscription
        return cfg

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Fabric:
        """From a topology file's JSON (docs/trees.md, "Topology files"): ports, MACs and IPs left out are
        given (the switch's lowest free port, in file order, hosts first; addresses by position)."""
        _entry(cfg, "", "topology")
        lists = {}
        for key, kind in (("switches", "switch"), ("hosts", "host"), ("links", "link")):
            entries = cfg.get(key, [])
            if not isinstance(entries, list):
                raise _fail(key, f"must be a list of {kind} objects, got {json.dumps(entries)}")
            for i, e in enumerate(entries):
                _entry(e, f"{key}[{i}]", kind)
            lists[key] = entries
        roots = cfg.get("roots", [])
        if not isinstance(roots, list):
            raise _fail("roots", f'must be a list of switch names such as ["c1"], got {json.dumps(roots)}')
        switches, hosts, links = lists["switches"], lists["hosts"], lists["links"]
        macs = _Free([n["mac"] for n in switches + hosts if isinstance(n.get("mac"), str)])
        ips = _Free([n["ip"] for n in switches + hosts if isinstance(n.get("ip"), str)])
        ports = _Ports([(h.get("switch"), h["port"]) for h in hosts if "port" in h]
                       + [(ln.get(e), ln[f"{e}_port"]) for ln in links for e in "ab" if f"{e}_port" in ln])
        nodes = tuple(Node(s["name"], s["mac"] if "mac" in s else macs.take("02:00:00:00:10:{:02x}"),
                           s["ip"] if "ip" in s else ips.take("10.0.1.{}"), s.get("target")) for s in switches)
        attached = tuple(Attached(h.get("name", f"h{i + 1}"), h["mac"] if "mac" in h else macs.take(
            "02:00:00:00:01:{:02x}"), h["ip"] if "ip" in h else ips.take("10.0.0.{}"), h["switch"],
            h["port"] if "port" in h else ports.take(h["switch"])) for i, h in enumerate(hosts))
        cables = []
        for ln in links:
            a_port = ln["a_port"] if "a_port" in ln else ports.take(ln["a"])
            b_port = ln["b_port"] if "b_port" in ln else ports.take(ln["b"])
            cables.append(Link(ln["a"], a_port, ln["b"], b_port, ln.get("rate"), ln.get("oversubscription")))
        return cls(nodes, attached, tuple(cables), tuple(roots), cfg.get("oversubscription"),
                   cfg.get("description", ""))


# what each object of a topology file holds: its required fields (with what they are) and its optional ones
_SCHEMA = {
    "topology": ({"switches": "a list of switches", "hosts": "a list of hosts"},
                 ("links", "roots", "oversubscription", "description")),
    "switch": ({"name": "its name"}, ("mac", "ip", "target")),
    "host": ({"switch": "the name of the switch it hangs on"}, ("name", "port", "mac", "ip")),
    "link": ({"a": "the name of one switch", "b": "the name of the other"},
             ("a_port", "b_port", "rate", "oversubscription")),
}


def _entry(cfg: Any, where: str, kind: str) -> None:
    """A topology file's object: a JSON object with its required fields and no unknown one."""
    required, optional = _SCHEMA[kind]
    has = ", ".join([*required, *optional])
    if not isinstance(cfg, dict):
        raise _fail(where, f"a {kind} is a JSON object with {has}, got {json.dumps(cfg)}")
    unknown = sorted(set(cfg) - set(required) - set(optional))
    if unknown:
        what = "unknown fabric fields" if kind == "topology" else "unknown field" + ("s" if len(unknown) > 1 else "")
        raise _fail(where, f"{what}: {', '.join(unknown)} (a {kind} has {has})")
    for k, what in required.items():
        if k not in cfg:
            raise _fail(where, f'lacks "{k}" ({what})')


class _Free:
    """Addresses for the nodes that name none: the first of a pattern's not named by any node."""

    def __init__(self, named: list[str]):
        self.used = {a.lower() for a in named}

    def take(self, pattern: str) -> str:
        for k in range(1, 255):
            address = pattern.format(k)
            if address not in self.used:
                self.used.add(address)
                return address
        raise _fail("", f"no free address left of the form {pattern.format('N')}: name them (mac, ip)")


class _Ports:
    """Ports for the hosts and link ends that name none: each switch's lowest free one, in file order."""

    def __init__(self, named: list[tuple[Any, Any]]):
        self.used = set(named)

    def take(self, switch: Any) -> int:
        port = next(p for p in range(1, MAX_PORT + 2) if (switch, p) not in self.used)
        self.used.add((switch, port))
        return port
