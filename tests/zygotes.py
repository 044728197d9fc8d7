"""A zygote started for two judges, as a batch's parent starts one (dispatch.SharedZygote), with
a fork server attached for each, in the test's own process."""
from grader.sandbox import forkserver


def shared_zygote(mode):
    """((its process, runtime folder, spool), (two fork servers attached to it)) for the
    isolation `mode`; forkserver.stop_zygote(*the first) ends it once both servers are closed."""
    proc, controls, runtime_dir, spool = forkserver.start_zygote(forkserver.supported(mode), 2)
    servers = tuple(forkserver.ForkServer(mode, attach={
        "fd": control.detach(), "runtime_dir": runtime_dir, "spool": spool, "tag": n})
        for n, control in enumerate(controls, 1))
    return (proc, runtime_dir, spool), servers
