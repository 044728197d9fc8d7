"""The fork servers a test module forks its workers from: one per isolation mode, started on
first use and kept for the module, as a batch judge keeps one for its class (conftest closes them
when the module ends, so no zygote outlives the module that counted its processes)."""
from grader.sandbox import forkserver

_servers = {}


def server(isolation):
    """This module's fork server for `isolation` ("process" or "bubblewrap")."""
    if isolation not in _servers:
        _servers[isolation] = forkserver.ForkServer(isolation)
    return _servers[isolation]


def close_all():
    for each in _servers.values():
        each.close()
    _servers.clear()
