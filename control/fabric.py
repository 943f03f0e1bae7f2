"""Switches, hosts on their ports and the links between them: hina's one description of a network.

Everything that needs a network takes a `Fabric`.  The control plane cuts
it into one `Topology` (topology.py) per switch, `Fabric.topologies(jobs)`,
each holding that switch's share of every job (docs/design.md, "Aggregation
trees"; docs/trees.md): its children's mask and members (hosts, or switches
below it, by member id), and its parents, one per root, so that slot s of a
job goes up to root s mod S.  The controller installs each share like any
topology, on the emulator, BMv2 or the XDP switch, so a tree may mix
targets.  Mininet builds it (mininet/topo.py), and both simulators run on
it: ns-3 with every worker and every switch (hina.sim.ns3sim), the scale
model on one representative worker's way up (hina.sim.scale).  Beside the
wiring it holds what the simulators take from the links: the hosts' `rate`,
each link's own `rate` or oversubscription (`link_rates`), and the packets
every switch port queues (`queue`).

Made in code by its shapes (`star`, `leaf_spine`, `fat_tree`, `tree`), or
written as a topology file (docs/trees.md, "Topology files", lists every
field; mininet/topologies/ holds examples):

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
a switch sends its slots up to every root or to one (a fat tree's aggregation switch carries
one core's), and every switch and link must lie on some host's way up to a root (else no host
reaches the switch, or the link closes a cycle).  Links are oriented when made: `a` is the
lower end.  A switch's member id in its parents' jobs is its place among each parent's switch
children, in switch order, and must be the same under every parent.

What a switch can be configured with is checked where it is configured, not here: a job of
at most 32 workers (`shares`: a switch's arrival bitmap, so no switch of its tree has more
children), ports 1..510 (`Topology`; Mininet's --topology says so on load), at most 32
children per switch on ns-3 (hina.sim.ns3sim).  So a fabric can describe what only a
simulator runs: a hypothetical star of 1,024 ports, a fat tree of 1,024 hosts.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
from typing import Any

from hina.wire.frames import ip_bytes, mac_bytes
from hina.wire.headers import MAX_WORKERS

from .config import MAX_PARENTS, JobConfig, Member
from .ledger import DEFAULT_POLICY, DEFAULT_SPACE, Held, Placement, choose, describe
from .topology import Host, Topology

TARGETS = ("emulator", "bmv2", "xdp")  # what a switch may run; None: the run's choice (mininet/run.py --switch)
MAX_PORT = 510  # the highest port a switch configured by hina takes: 511 is BMv2's drop port (topology.Host)
FAT_TREE_K = range(4, 17, 2)  # k/2 parents per edge switch, at most MAX_PARENTS


def _fail(where: str, why: str) -> ValueError:
    """The one-line error of a topology: the field, what is wrong with it, the fix."""
    return ValueError(f"topology {where}: {why}" if where else f"topology: {why}")


def _names(names) -> str:
    names = list(names)
    return ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")


def _positive(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, int | float) and 0 < x < math.inf


def _count(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, int) and x >= 1


def address(kind: str, i: int) -> tuple[str, str]:
    """The MAC and IPv4 address of the i-th (from 1) host or switch given one by position: 254 to a block,
    the block in the fourth MAC byte and the second IPv4 octet (hosts 02:00:00:00:01:i and 10.0.0.i,
    switches 02:00:00:00:10:i and 10.0.1.i for the first 254)."""
    block, k = divmod(i - 1, 254)
    if not 0 <= block <= 255:
        raise _fail("", f"no address left for {kind} {i}: name them (mac, ip)")
    mac, ip = (0x01, 0) if kind == "host" else (0x10, 1)
    return f"02:00:00:{block:02x}:{mac:02x}:{k + 1:02x}", f"10.{block}.{ip}.{k + 1}"


class _Refused(ValueError):
    """A tree the roots cannot make: the message gains the fix (`fix`, and which roots would do)."""

    def __init__(self, message: str, fix: str = ""):
        super().__init__(message)
        self.fix = fix


@dataclasses.dataclass(frozen=True)
class Node:
    """A switch of the fabric: its name, the address frames it emits carry, and its target ("emulator",
    "bmv2" or "xdp"; None: whatever the run chooses)."""

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
    rate in Mbit/s or its oversubscription (`Fabric.link_rates`)."""

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
class _Tree:
    """A job's tree over the fabric: each switch's children (("host", rank, port) or ("switch", its index in
    `switches`, port), sorted), its parents (one per root it sends slots up to, in root order: (the parent,
    my port, its port)), each switch's member id in its parents' jobs, and the links crossed on the way up
    (lower, its port, upper, its port)."""

    children: dict[str, tuple[tuple[str, int, int], ...]]
    parents: dict[str, tuple[tuple[str, int, int], ...]]
    ids: dict[str, int]
    crossed: frozenset


@dataclasses.dataclass(frozen=True)
class Fabric:
    """Switches, hosts (on a switch port, in rank order) and links; optionally the roots of a job over every
    host (default: the one switch holding hosts, else the top tier), the oversubscription of the links
    that name neither rate nor oversubscription, the hosts' links' rate in Mbit/s, the packets each switch
    port queues (None: no limit) and a description.  Checked whole when made."""

    switches: tuple[Node, ...]
    hosts: tuple[Attached, ...]
    links: tuple[Link, ...] = ()
    roots: tuple[str, ...] = ()
    oversubscription: float | None = None
    description: str = ""
    rate: float | None = None
    queue: int | None = None

    def __post_init__(self) -> None:
        for f in ("switches", "hosts", "links", "roots"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        self._check_fields()
        # not fields: derived, never compared
        object.__setattr__(self, "_index", {s.name: i for i, s in enumerate(self.switches)})
        object.__setattr__(self, "_host_index", {h.name: i for i, h in enumerate(self.hosts)})
        adjacent = collections.defaultdict(list)
        for ln in self.links:
            adjacent[ln.a].append((ln.a_port, ln.b, ln.b_port))
            adjacent[ln.b].append((ln.b_port, ln.a, ln.a_port))
        object.__setattr__(self, "_adjacent", {s: sorted(v) for s, v in adjacent.items()})
        self._check_joined()
        top = self.roots or self._top_tier()
        tree = self._rooted(top)
        self._check_used(top, tree)
        object.__setattr__(self, "links", tuple(
            ln if (ln.a, ln.a_port, ln.b, ln.b_port) in tree.crossed
            else dataclasses.replace(ln, a=ln.b, a_port=ln.b_port, b=ln.a, b_port=ln.a_port) for ln in self.links))
        object.__setattr__(self, "_top", top)
        object.__setattr__(self, "_every", tree)

    def _rooted(self, top: tuple[str, ...]) -> _Tree:
        """The tree of a job over every host, rooted at `top`; one-line ValueErrors naming the roots and a fix."""
        how = "as named" if self.roots else ("the one switch holding hosts" if len(top) == 1 and top[0] in
                                             self._holding() else "the top tier, as none are named")
        if len(top) > MAX_PARENTS:
            raise _fail(f"roots ({_names(top)}: {how})", f"at most {MAX_PARENTS} (a switch spreads its slots over at "
                                                         f"most {MAX_PARENTS} parents), got {len(top)}; name at most "
                                                         f"{MAX_PARENTS} in roots")
        try:
            return self._walk(top, dict(enumerate(self.hosts)), f"topology roots ({', '.join(top)}: {how})")
        except _Refused as exc:
            raise ValueError(f"{exc}; {exc.fix + ', or ' if exc.fix else ''}{self._roots_fix()}") from None

    # -- checks -------------------------------------------------------------------
    def _holding(self) -> list[str]:
        """The switches holding hosts, in switch order."""
        on = {h.switch for h in self.hosts}
        return [s.name for s in self.switches if s.name in on]

    def _check_fields(self) -> None:
        """Each field on its own: names, addresses, targets, ports, rates, queues, roots."""
        if not self.switches:
            raise _fail("switches", "none given; a topology needs at least one switch")
        if not self.hosts:
            raise _fail("hosts", "none given; a topology needs at least one host on a switch")
        self._check_nodes()
        self._check_ports()
        self._check_scalars()
        known = [s.name for s in self.switches]
        for i, r in enumerate(self.roots):
            if r not in known:
                raise _fail(f"roots[{i}]", f"no switch named {r!r} (switches are {_names(known)})")
            if r in self.roots[:i]:
                raise _fail(f"roots[{i}]", f"{r} is named twice; name each root once")
        if len(self.roots) > MAX_PARENTS:
            raise _fail("roots", f"at most {MAX_PARENTS} (a switch spreads its slots over at most {MAX_PARENTS} "
                                 f"parents), got {len(self.roots)}")

    def _check_nodes(self) -> None:
        """Every switch and host: a name of its own, a MAC of its own and an IPv4 address; a switch's target."""
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
        for i, s in enumerate(self.switches):
            if s.target not in (None, *TARGETS):
                raise _fail(f"switches[{i}].target", f"must be emulator, bmv2 or xdp, got {s.target!r} (or leave "
                                                     f"it out: the run's --switch, --spine-switch above the leaves)")

    def _check_ports(self) -> None:
        """Each host on a known switch's free port; each link between two known switches, on free ports, with a
        positive rate or oversubscription (not both)."""
        known = {s.name for s in self.switches}
        listed = [s.name for s in self.switches]
        used: dict[tuple[str, int], str] = {}

        def port(where: str, switch: str, p: Any) -> None:
            if not _count(p):
                raise _fail(where, f"must be a port number from 1, got {p!r} (or leave it out: the switch's lowest "
                                   f"free port)")
            if (switch, p) in used:
                raise _fail(where, f"ports used twice: {switch} port {p} is also {used[switch, p]}'s; give it a "
                                   f"free port (or leave it out)")
            used[switch, p] = where.rpartition(".")[0]

        for i, h in enumerate(self.hosts):
            if h.switch not in known:
                raise _fail(f"hosts[{i}].switch", f"no switch named {h.switch!r} (switches are {_names(listed)})")
            port(f"hosts[{i}].port", h.switch, h.port)
        for i, ln in enumerate(self.links):
            for end in ("a", "b"):
                if getattr(ln, end) not in known:
                    raise _fail(f"links[{i}].{end}", f"no switch named {getattr(ln, end)!r} "
                                                     f"(switches are {_names(listed)})")
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

    def _check_scalars(self) -> None:
        """The fabric's own numbers: the oversubscription, the hosts' rate, the queue, the description."""
        if self.oversubscription is not None and not _positive(self.oversubscription):
            raise _fail("oversubscription", f"must be a positive ratio (4 for 4:1), got {self.oversubscription!r} "
                                            f"(or leave it out: --oversubscription)")
        if self.rate is not None and not _positive(self.rate):
            raise _fail("rate", f"must be a positive number of Mbit/s (the hosts' links), got {self.rate!r} (or "
                                f"leave it out: Mininet's --bw)")
        if self.queue is not None and not _count(self.queue):
            raise _fail("queue", f"must be a whole number of packets from 1, got {self.queue!r} (or leave it out: "
                                 f"no limit)")
        if not isinstance(self.description, str):
            raise _fail("description", f"must be a string, got {self.description!r}")

    def _check_joined(self) -> None:
        """No link between two leaves, and every switch joined to the hosts."""
        holding = self._holding()
        leaves = set(holding)
        for i, ln in enumerate(self.links):
            if ln.a in leaves and ln.b in leaves:
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
            if s.name not in joined and s.name in leaves:
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

    def _check_used(self, top: tuple[str, ...], tree: _Tree) -> None:
        """Every switch and link on some host's way up to a root."""
        for j, s in enumerate(self.switches):
            if s.name not in tree.children:
                raise _fail(f"switches[{j}] ({s.name!r})", f"no host can reach it: it lies on no host's way up to "
                                                           f"the roots ({', '.join(top)}); remove it, or link it "
                                                           f"between the hosts and a root")
        for i, ln in enumerate(self.links):
            if not {(ln.a, ln.a_port, ln.b, ln.b_port), (ln.b, ln.b_port, ln.a, ln.a_port)} & tree.crossed:
                raise _fail(f"links[{i}] ({ln.a} port {ln.a_port} - {ln.b} port {ln.b_port})",
                            f"closes a cycle: {ln.a} and {ln.b} reach the roots ({', '.join(top)}) another way, so "
                            f"no partial crosses it; remove it")

    # -- shapes -----------------------------------------------------------------
    @classmethod
    def star(cls, hosts: int, *, rate: float | None = None, queue: int | None = None) -> Fabric:
        """One switch l1, hosts h1.. on ports 1..hosts (more than 32 only a simulator's hypothetical switch
        holds)."""
        return cls.leaf_spine(hosts, rack=hosts, spines=0, rate=rate, queue=queue)

    @classmethod
    def leaf_spine(cls, hosts: int, *, rack: int = 32, spines: int = 4, rate: float | None = None,
                   uplink_rate: float | None = None, queue: int | None = None) -> Fabric:
        """Racks of `rack` hosts (the last one possibly short) under leaves l1.., every leaf's port rack+1+k
        cabled to spine k's port 1+l; every spine roots 1/`spines` of the slots.  `uplink_rate`: every link's
        Mbit/s (None: from the oversubscription, `link_rates`).  Hosts are h1.. in leaf order, 10.0.0.i;
        leaves 10.0.1.l, spines 10.0.1.128+k (`address`)."""
        if hosts < 1 or rack < 1 or spines < 0:
            raise ValueError(f"a leaf/spine fabric needs hosts >= 1, a rack of >= 1 and spines >= 0: got {hosts}, "
                             f"{rack}, {spines}")
        leaves = -(-hosts // rack)
        if leaves > 1 and spines < 1:
            raise ValueError(f"{leaves} racks need spines >= 1 above them, got {spines}")
        spine_at = 128 if leaves <= 128 else leaves  # the first spine's place in the switches' addresses
        switches = [Node(f"l{i + 1}", *address("switch", i + 1)) for i in range(leaves)]
        switches += [Node(f"s{k + 1}", *address("switch", spine_at + k + 1)) for k in range(spines)]
        attached = [Attached(f"h{i + 1}", *address("host", i + 1), f"l{i // rack + 1}", i % rack + 1)
                    for i in range(hosts)]
        links = [Link(f"l{i + 1}", rack + 1 + k, f"s{k + 1}", 1 + i, rate=uplink_rate)
                 for i in range(leaves) for k in range(spines)]
        roots = tuple(f"s{k + 1}" for k in range(spines)) if leaves == 1 and spines else ()
        return cls(tuple(switches), tuple(attached), tuple(links), roots, rate=rate, queue=queue,
                   description=f"{hosts} hosts in racks of {rack}" + (f" under {spines} spines" if spines else ""))

    @classmethod
    def fat_tree(cls, hosts: int, *, k: int = 16, rate: float | None = None, queue: int | None = None) -> Fabric:
        """The first `hosts` hosts of a k-ary fat tree: k/2 hosts per edge switch e1.., k/2 edge and k/2
        aggregation switches a1.. per pod, every link at `rate`.  An edge switch's slots go over its pod's
        k/2 aggregation switches; aggregation switch j of every pod sends its slots (those with s mod k/2 = j)
        to core j k/2 + j of the full tree, so k/2 cores (c1..) root the job.  Only the switches that carry
        the job are built: the other cores' links would stay idle."""
        if k not in FAT_TREE_K:
            raise ValueError(f"k must be even, 4..16 (an edge switch spreads its slots over k/2 aggregation "
                             f"switches, at most {MAX_PARENTS}), got {k}")
        half = k // 2
        if not 1 <= hosts <= k ** 3 // 4:
            raise ValueError(f"a k={k} fat tree has {k ** 3 // 4} hosts, got {hosts}")
        edges = -(-hosts // half)
        pods = -(-edges // half)
        names = [f"e{e + 1}" for e in range(edges)] + [f"a{a + 1}" for a in range(pods * half)]
        names += [f"c{j + 1}" for j in range(half)]
        switches = [Node(name, *address("switch", i + 1)) for i, name in enumerate(names)]
        attached = [Attached(f"h{i + 1}", *address("host", i + 1), f"e{i // half + 1}", i % half + 1)
                    for i in range(hosts)]
        links = [Link(f"e{e + 1}", half + 1 + j, f"a{e // half * half + j + 1}", e % half + 1, rate=rate)
                 for e in range(edges) for j in range(half)]  # an aggregation switch's ports 1..k/2: its edges
        links += [Link(f"a{p * half + j + 1}", half + 1 + j, f"c{j + 1}", p + 1, rate=rate)
                  for p in range(pods) for j in range(half)]  # its uplink to core j k/2 + j: its port k/2+1+j
        return cls(tuple(switches), tuple(attached), tuple(links), tuple(f"c{j + 1}" for j in range(half)),
                   rate=rate, queue=queue, description=f"the first {hosts} hosts of a k={k} fat tree")

    @classmethod
    def tree(cls, hosts: int, depth: int, *, rate: float | None = None, uplink_rate: float | None = None,
             queue: int | None = None) -> Fabric:
        """A tree of `depth` tiers (1 to 3) of switches, each with one parent: every tier below the root has
        ceil(hosts^(1/depth)) children per switch and the root the rest (1,024 hosts: 32 x 32, or 11 x 11 x 9;
        `fanins`).  Leaves l1.., then a1.. and c1.. (two tiers: s1); `uplink_rate` as `leaf_spine`'s."""
        if not 1 <= depth <= 3:
            raise ValueError(f"a tree has 1 to 3 tiers, got {depth}")
        fan = fanins(hosts, depth)
        counts = [-(-hosts // math.prod(fan[:t + 1])) for t in range(depth)]  # switches per tier, leaf first
        prefix = ("l", "s") if depth == 2 else ("l", "a", "c")
        tiers = [[f"{prefix[t]}{i + 1}" for i in range(n)] for t, n in enumerate(counts)]
        switches = [Node(name, *address("switch", i + 1)) for i, name in enumerate(itertools.chain(*tiers))]
        attached = [Attached(f"h{i + 1}", *address("host", i + 1), tiers[0][i // fan[0]], i % fan[0] + 1)
                    for i in range(hosts)]
        links = [Link(name, fan[t] + 1, tiers[t + 1][i // fan[t + 1]], i % fan[t + 1] + 1, rate=uplink_rate)
                 for t in range(depth - 1) for i, name in enumerate(tiers[t])]
        return cls(tuple(switches), tuple(attached), tuple(links), rate=rate, queue=queue,
                   description=f"{hosts} hosts under a tree of " + " x ".join(map(str, fan)))

    def switch(self, name: str) -> Node:
        try:
            return self.switches[self._index[name]]
        except KeyError:
            raise ValueError(f"no switch {name!r} in the fabric") from None

    def host(self, name: str) -> Attached:
        try:
            return self.hosts[self._host_index[name]]
        except KeyError:
            raise ValueError(f"no host {name!r} in the fabric") from None

    def member_id(self, switch: str) -> int | None:
        """`switch`'s member id in its parents' jobs, in the tree of a job over every host (None: a root)."""
        self.switch(switch)
        return self._every.ids.get(switch)

    def neighbours(self, switch: str) -> list[tuple[int, str, int]]:
        """(my port, the other switch, its port) for each link of `switch`, by my port."""
        return self._adjacent.get(switch, [])

    # -- trees ------------------------------------------------------------------
    @property
    def top(self) -> tuple[str, ...]:
        """The roots of a job over every host: `roots` if named, else the one switch holding hosts, else the
        top tier (the switches farthest from the hosts)."""
        return self._top

    def children(self, switch: str) -> tuple[tuple[str, int, int], ...]:
        """`switch`'s children in the tree of a job over every host: ("host", its index in `hosts`, port) or
        ("switch", its index in `switches`, port), hosts first, each kind in order."""
        self.switch(switch)
        return self._every.children[switch]

    def parents(self, switch: str) -> tuple[tuple[str, int, int], ...]:
        """`switch`'s parents in the tree of a job over every host, one per root it sends slots up to, in root
        order (slot s goes to the (s mod len)-th): (the parent, my port, its port); none at a root."""
        self.switch(switch)
        return self._every.parents.get(switch, ())

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

    def _walk(self, roots: tuple[str, ...], where: dict[int, Attached], who: str) -> _Tree:
        """Each root's shortest-path tree, cut to the ways up from the workers' switches (`where`: rank ->
        host): every switch's children, the same under every root; its parents, one per root it sends slots
        up to (every root, or one); each switch's member id; the links those ways cross.  One-line
        ValueErrors, a `_Refused` where the roots cannot make the tree."""
        children: dict[str, frozenset] = {}
        first: dict[str, str] = {}  # switch -> the root whose tree gave it its children first
        parents: dict[str, list] = collections.defaultdict(list)
        under: dict[str, list[str]] = collections.defaultdict(list)  # switch -> the roots it sends up to
        crossed: set[tuple[str, int, str, int]] = set()
        for root in roots:
            tree = self._tree(root)
            below = self._ways_up(root, roots, tree, where, crossed, who)
            for sw, kids in below.items():
                if sw in children and children[sw] != kids:
                    raise _Refused(f"{who}: switch {sw} has other children under root {root} than under root "
                                   f"{first[sw]}")
                children[sw] = kids
                first.setdefault(sw, root)
                if sw != root:
                    parents[sw].append(tree[sw])
                    under[sw].append(root)
        for sw, kids in children.items():
            if sw in roots and under.get(sw):
                raise _Refused(f"{who}: switch {sw} is a root and below another root ({under[sw][0]})")
            if 1 < len(under.get(sw, ())) < len(roots):
                missed = next(r for r in roots if r not in under[sw])
                raise _Refused(f"{who}: switch {sw} sends slots up to roots {', '.join(under[sw])} but lies on no "
                               f"worker's way up to root {missed}; a switch sends its slots up to every root or to one")
            if len({kind for kind, _, _ in kids}) > 1:
                names = sorted(self.switches[i].name for kind, i, _ in kids if kind == "switch")
                raise _Refused(f"{who}: switch {sw} would have both workers and switches ({', '.join(names)}) "
                               f"below it; a switch with hosts is a leaf")
        return _Tree({sw: tuple(sorted(kids)) for sw, kids in children.items()},
                     {sw: tuple(p) for sw, p in parents.items()}, self._member_ids(children, who), frozenset(crossed))

    def _ways_up(self, root: str, roots: tuple[str, ...], tree: dict, where: dict[int, Attached], crossed: set,
                 who: str) -> dict[str, frozenset]:
        """Under one root: each switch on a worker's way up and its children there (adding the links crossed)."""
        below = collections.defaultdict(set)
        for rank, h in where.items():
            if h.switch != root and h.switch not in tree:
                raise ValueError(f"{who}: worker {rank} ({h.name}) cannot reach root {root}")
            below[h.switch].add(("host", rank, h.port))
            sw = h.switch
            while sw != root:  # the way up: each switch on it is a child of the next
                up, my_port, up_port = tree[sw]
                if up in roots and up != root:
                    raise _Refused(f"{who}: {sw} reaches root {root} only through root {up}", f"link {sw} to {root}")
                child = ("switch", self._index[sw], up_port)
                if child in below[up]:
                    break  # another worker's way up, walked already from here on
                below[up].add(child)
                crossed.add((sw, my_port, up, up_port))
                sw = up
        return {sw: frozenset(kids) for sw, kids in below.items()}

    def _member_ids(self, children: dict[str, frozenset], who: str) -> dict[str, int]:
        """Each switch's member id in its parents' jobs: its place among each parent's switch children, in switch
        order, which must be the same under every parent."""
        ids: dict[str, int] = {}
        where: dict[str, str] = {}
        for sw, kids in children.items():
            for place, i in enumerate(sorted(i for kind, i, _ in kids if kind == "switch")):
                name = self.switches[i].name
                if ids.setdefault(name, place) != place:
                    raise ValueError(f"{who}: switch {name} would be member {ids[name]} of {where[name]}'s job and "
                                     f"member {place} of {sw}'s; a switch has one member id in its parents' jobs (its "
                                     f"place among their switch children, in switch order): give its parents the "
                                     f"same children")
                where.setdefault(name, sw)
        return ids

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
            tree = self._walk(roots, where, f"job {job.job_id}")
        except _Refused as exc:
            raise ValueError(f"{exc}; {exc.fix + ', or ' if exc.fix else ''}give the job one root (TreeJob roots)") \
                from None
        out = {}
        for sw, kids in tree.children.items():  # at most 32 workers: at most 32 children anywhere
            hosts_here = kids[0][0] == "host"
            members = tuple(Member(i if hosts_here else tree.ids[self.switches[i].name], port) for _, i, port in kids)
            mask = sum(1 << m.worker_id for m in members)
            parents = tuple(Member(tree.ids[sw], my_port) for _, my_port, _ in tree.parents.get(sw, ()))
            out[sw] = JobConfig(job.job_id, n if hosts_here else len(members), job.words, job.slot_base, job.slots,
                                members, mask=mask, parents=parents)
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
                kids = self._every.children[sw]
                out[sw] = 1 if kids[0][0] == "host" else 1 + max(tier(self.switches[i].name) for _, i, _ in kids)
            return out[sw]

        return {s.name: tier(s.name) for s in self.switches}

    def hosts_under(self, switch: str) -> int:
        """How many hosts the tree of a job over every host has below `switch`."""
        return sum(1 if kind == "host" else self.hosts_under(self.switches[i].name)
                   for kind, i, _ in self._every.children[switch])

    def uplinks(self, switch: str) -> tuple[Link, ...]:
        """The links up from `switch` (toward the roots: it is their `a`)."""
        return tuple(ln for ln in self.links if ln.a == switch)

    def link_rates(self, rate: float | None = None, oversubscription: float = 1.0) -> dict[tuple[str, str],
                                                                                         float | None]:
        """Mbit/s of each link between switches, keyed (lower, upper); None where nothing sets it.  The link's
        `rate` where it names one; else the rate of the hosts below its lower end over that switch's uplinks,
        divided by R: the link's oversubscription, else the fabric's, else `oversubscription` (R = hosts x
        host rate / (uplinks x uplink rate), the usual ratio: 4 hosts at 100 Mbit/s on one 100 Mbit/s uplink
        is 4:1; at every tier, so an aggregation switch's uplinks carry 1/R of the rate of all the hosts below
        it).  The hosts' rate is `rate`, else the fabric's (0: unshaped)."""
        host_rate = self.rate if rate is None else rate
        ups = collections.Counter(ln.a for ln in self.links)
        under: dict[str, int] = {}
        rates = {}
        for ln in self.links:
            link = ln.rate
            if link is None and host_rate:
                if ln.a not in under:
                    under[ln.a] = self.hosts_under(ln.a)
                r = ln.oversubscription or self.oversubscription or oversubscription
                link = under[ln.a] * host_rate / (r * ups[ln.a])
            rates[ln.a, ln.b] = link
        return rates

    def oversubscription_at(self, switch: str, rate: float | None = None) -> float | None:
        """The hosts' rate below `switch` over its uplinks' (`link_rates`); None at a root or where a rate is
        unknown."""
        rates = self.link_rates(rate)
        up = [rates[ln.a, ln.b] for ln in self.uplinks(switch)]
        host_rate = self.rate if rate is None else rate
        if not up or not host_rate or None in up:
            return None
        return self.hosts_under(switch) * host_rate / sum(up)

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
            levels.append(f"tier {t}: {_names(names)}")
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
        for key in ("oversubscription", "rate", "queue"):
            if getattr(self, key) is not None:
                cfg[key] = getattr(self, key)
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
        macs = _Free([n["mac"] for n in switches + hosts if isinstance(n.get("mac"), str)], 0)
        ips = _Free([n["ip"] for n in switches + hosts if isinstance(n.get("ip"), str)], 1)
        ports = _Ports([(h.get("switch"), h["port"]) for h in hosts if "port" in h]
                       + [(ln.get(e), ln[f"{e}_port"]) for ln in links for e in "ab" if f"{e}_port" in ln])
        nodes = tuple(Node(s["name"], s["mac"] if "mac" in s else macs.take("switch"),
                           s["ip"] if "ip" in s else ips.take("switch"), s.get("target")) for s in switches)
        attached = tuple(Attached(h.get("name", f"h{i + 1}"), h["mac"] if "mac" in h else macs.take("host"),
                                  h["ip"] if "ip" in h else ips.take("host"), h["switch"],
                                  h["port"] if "port" in h else ports.take(h["switch"])) for i, h in enumerate(hosts))
        cables = []
        for ln in links:
            a_port = ln["a_port"] if "a_port" in ln else ports.take(ln["a"])
            b_port = ln["b_port"] if "b_port" in ln else ports.take(ln["b"])
            cables.append(Link(ln["a"], a_port, ln["b"], b_port, ln.get("rate"), ln.get("oversubscription")))
        return cls(nodes, attached, tuple(cables), tuple(roots), cfg.get("oversubscription"),
                   cfg.get("description", ""), cfg.get("rate"), cfg.get("queue"))


def fanins(hosts: int, depth: int) -> tuple[int, ...]:
    """Children per switch of a `depth`-tier tree over `hosts` hosts, leaf tier first: ceil(hosts^(1/depth))
    below every tier but the root, whose fan-in makes up the rest."""
    if hosts < 1 or depth < 1:
        raise ValueError(f"hosts and depth must be >= 1, got {hosts} and {depth}")
    if depth == 1:
        return (hosts,)
    k = math.ceil(round(hosts ** (1 / depth), 9))
    below = [k] * (depth - 1)
    return (*below, max(1, -(-hosts // math.prod(below))))


# what each object of a topology file holds: its required fields (with what they are) and its optional ones
_SCHEMA = {
    "topology": ({"switches": "a list of switches", "hosts": "a list of hosts"},
                 ("links", "roots", "oversubscription", "rate", "queue", "description")),
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
    """Addresses for the nodes that name none: the first of `address`'s (part 0: MAC, 1: IPv4) not named."""

    def __init__(self, named: list[str], part: int):
        self.used = {a.lower() for a in named}
        self.part = part
        self.next = {"host": 1, "switch": 1}

    def take(self, kind: str) -> str:
        while True:
            got = address(kind, self.next[kind])[self.part]
            self.next[kind] += 1
            if got not in self.used:
                self.used.add(got)
                return got


class _Ports:
    """Ports for the hosts and link ends that name none: each switch's lowest free one, in file order."""

    def __init__(self, named: list[tuple[Any, Any]]):
        self.used = set(named)

    def take(self, switch: Any) -> int:
        port = next(p for p in itertools.count(1) if (switch, p) not in self.used)
        self.used.add((switch, port))
        return port
