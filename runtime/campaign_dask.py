"""Running the tasks of a campaign on Dask with waits that end (:mod:`soadyn.runtime.campaign`).

Connecting to a scheduler (a TCP probe first: a refused port fails at once, a peer that accepts and does
not speak Dask, an HTTP server for instance, fails after ``connect`` seconds instead of a huge allocation),
the first worker (``workers`` seconds) and the next finished task (``task`` seconds) are bounded; each
gives a one-line :class:`~soadyn.runtime.campaign_store.CampaignError`: what it waited for, how long, what
to check.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from soadyn.model.names import brief, terminal
from soadyn.runtime.campaign_store import CampaignError
from soadyn.runtime.scenario import Scenario

#: default waits [s]: connecting to a scheduler, the first worker, the next finished task
CONNECT_TIMEOUT = 30.0
WORKER_TIMEOUT = 120.0
TASK_TIMEOUT = 900.0


@dataclass
class Waits:
    """How long :func:`run` waits for a scheduler, the first worker and the next finished task [s]."""

    connect: float = CONNECT_TIMEOUT
    workers: float = WORKER_TIMEOUT
    task: float = TASK_TIMEOUT


def probe_scheduler(address: str, timeout: float) -> None:
    """Before handing ``address`` to Dask: a TCP peer must accept within ``timeout`` and send the first
    8 bytes of a Dask handshake (a little-endian message length; a Dask listener writes its handshake at
    once).  A refused port fails at once; a silent peer or another protocol (an HTTP server) after
    ``timeout``, with a :class:`CampaignError` instead of a long retry or a huge allocation."""
    import struct

    from distributed.comm.addressing import parse_address, parse_host_port

    shown = terminal(address, 200)
    try:
        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return                            # tls://, ucx://, inproc://: Dask's own timeout applies
        host, port = parse_host_port(loc)
    except (ValueError, TypeError) as e:
        raise CampaignError(f"--scheduler {shown}: not a scheduler address ({terminal(e, 100)}); give "
                            "tcp://HOST:PORT as printed by `dask scheduler`") from None
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise CampaignError(f"Dask scheduler at {shown}: connection refused; check the address and that "
                            "`dask scheduler` runs there") from None
    except TimeoutError:
        raise CampaignError(f"Dask scheduler at {shown}: no TCP connection within {timeout:g} s; check the "
                            "address, the network and firewalls") from None
    except OSError as e:
        raise CampaignError(f"Dask scheduler at {shown}: cannot connect ({e.strerror or e}); check the "
                            "address") from None
    with sock:
        head = b""
        try:
            while len(head) < 8:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
        except (TimeoutError, OSError):
            pass
    size = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
    if not 0 < size < 1 << 24:
        got = "sent no Dask handshake" if not head else f"answered {brief(head)} (not the Dask protocol)"
        raise CampaignError(f"the peer at {shown} accepted the connection but {got} within {timeout:g} s; "
                            "check that the address is a Dask scheduler's (`dask scheduler` prints it)")


def connect(client: Any, workers: int | None, waits: Waits) -> tuple[Any, Any, Any]:
    """(client, the client to close, the cluster to close): an embedded LocalCluster (``client=None``), a
    scheduler address, or the given ``distributed.Client``; then wait for a worker."""
    from distributed import Client, LocalCluster

    cluster = own = None
    if client is None:
        n = workers or os.cpu_count() or 1
        try:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0")
            client = own = Client(cluster, timeout=waits.connect)
        except Exception as e:  # noqa: BLE001 - whatever Dask raises, one line
            if cluster is not None:
                cluster.close()
            raise CampaignError(f"cannot start an embedded Dask cluster of {n} workers "
                                f"({type(e).__name__}: {terminal(e, 200)})") from None
        address = cluster.scheduler_address
    elif isinstance(client, str):
        address = client
        probe_scheduler(address, waits.connect)
        try:
            client = own = Client(address, timeout=waits.connect)
        except (OSError, TimeoutError, MemoryError, ValueError) as e:
            raise CampaignError(f"cannot connect to the Dask scheduler at {terminal(address, 200)} within "
                                f"{waits.connect:g} s ({type(e).__name__}: {terminal(e, 200)}); check "
                                "the address and the scheduler") from None
    else:
        address = getattr(client, "scheduler", None) and client.scheduler.address
    try:
        client.wait_for_workers(1, timeout=waits.workers)
    except (TimeoutError, OSError) as e:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()
        shown = terminal(address, 200)
        raise CampaignError(f"no worker joined the Dask scheduler at {shown} within {waits.workers:g} s "
                            f"({type(e).__name__}); start workers with `dask worker {shown}` (they need this "
                            "soadyn with the campaign extra) or give a longer worker timeout") from None
    return client, own, cluster


def run_dask(
    lost: Callable[[list[Scenario], BaseException], None],
    chunks: Iterator[list[Scenario]],
    paths: dict[str, str],
    digests: dict[str, str],
    zarr_path: str | None,
    client: Any,
    workers: int | None,
    record: Callable[[list[dict[str, Any]]], None],
    waits: Waits,
    task: Callable[..., list[dict[str, Any]]],
) -> int:
    """Submit the ``chunks`` as ``task(chunk, paths, zarr_path, digests)`` (at most 4 per worker in flight),
    ``record`` the rows of each finished task, hand a failed one to ``lost``; returns the number of worker
    threads.  Every wait ends (:class:`Waits`)."""
    from distributed import wait

    client, own, cluster = connect(client, workers, waits)
    inflight: dict[str, tuple[Any, list[Scenario]]] = {}
    try:
        n_workers = max(1, sum(client.nthreads().values()))
        window = 4 * n_workers
        # a task that fails for good (its worker killed more often than
        # distributed.scheduler.allowed-failures, a worker that cannot load the modules) is not recorded,
        # so a rerun retries it; scenario failures (divergence...) are rows, not task errors
        it = iter(chunks)

        def submit() -> bool:
            chunk = next(it, None)
            if chunk is None:
                return False
            key = f"soadyn-scenario-{chunk[0].id}-{time.time_ns()}"
            fut = client.submit(task, chunk, paths, zarr_path, digests, pure=False, key=key)
            inflight[key] = (fut, chunk)
            return True

        for _ in range(window):
            if not submit():
                break
        last = time.monotonic()
        while inflight:
            left = waits.task - (time.monotonic() - last)
            try:
                if left <= 0:
                    raise TimeoutError
                done, _ = wait([f for f, _ in inflight.values()], timeout=left, return_when="FIRST_COMPLETED")
            except TimeoutError:
                ids = sorted(sc.id for _, chunk in inflight.values() for sc in chunk)
                raise CampaignError(
                    f"no task finished within {waits.task:g} s (waiting for scenarios {brief(ids)}); check "
                    "the workers (their logs, memory, that they still run) or give a longer task timeout; "
                    "recorded rows are kept, rerun to resume") from None
            for fut in done:
                _, chunk = inflight.pop(fut.key)
                if fut.status == "finished":
                    rows = fut.result()
                    fut.release()
                    record(rows)
                else:
                    err = fut.exception() if fut.status == "error" else RuntimeError(f"task {fut.status}")
                    fut.release()
                    lost(chunk, err)
                last = time.monotonic()
                submit()
        return n_workers
    finally:
        for fut, _ in inflight.values():
            fut.cancel()
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()


