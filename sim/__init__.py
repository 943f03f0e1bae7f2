"""The simulator: hina's real sender and switch rules on a virtual clock, no sockets, no sleeps.

`netsim` drives workers' `PhaseTransfer`s and `Pipeline`s over modelled
links deterministically (the protocol tests and the loss model run on it).
"""
