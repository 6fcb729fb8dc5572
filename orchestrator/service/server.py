"""``mnemon serve``: hypercorn's Trio worker serving the app, inside the supervisor's nursery.

Shutdown on SIGINT/SIGTERM: every running agent is cancelled through its own cancel scope (so its
log ends with ``SessionEnded{cancelled}`` and folds), event streams end, then hypercorn stops
accepting and closes, and the process exits 0."""

from __future__ import annotations

import signal
import socket
from typing import Any

import trio
from hypercorn.trio import serve as hypercorn_serve

from ..supervisor import open_supervisor
from .app import create_app
from .control import resume_crashed
from .listen import bind, served_config
from .runs import Run


async def shutdown_agents(run: Run) -> None:
    """Cancel every running agent and job and wait until each has recorded its end."""
    run.closing = True
    run.changed.set()
    await run.jobs.stop_all()
    if run.sup is None:
        return
    nodes = [n for n in run.sup.agents.values() if n.state == "running"]
    for n in nodes:
        n.scope.cancel()
    for n in nodes:
        await n.done.wait()


async def serve(run: Run, *, token: str, host: str = "127.0.0.1", port: int = 8765,
                provider: Any = None, provider_name: str | None = None, version: str = "0",
                stop: trio.Event | None = None, on_ready=None, resume: bool = True,
                sock: socket.socket | None = None,
                task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``run`` until ``stop`` is set (or SIGINT/SIGTERM when ``stop`` is None).
    ``resume``: first resume the agents a crash left running in the run root (``--no-resume``
    not to; ``control.resume_crashed``). ``sock``: the listening socket, bound by the caller
    before it wrote anything (``listen.bind``; ``mnemon serve`` does); else ``host:port`` is
    bound here, first (``listen.BindError``)."""
    sock = bind(host, port) if sock is None else sock
    try:
        await _serve(run, token=token, sock=sock, provider=provider,
                     provider_name=provider_name, version=version, stop=stop,
                     on_ready=on_ready, resume=resume, task_status=task_status)
    finally:
        sock.close()


async def _serve(run: Run, *, token: str, sock: socket.socket, provider: Any,
                 provider_name: str | None, version: str, stop: trio.Event | None, on_ready,
                 resume: bool, task_status) -> None:
    stop = trio.Event() if stop is None else stop
    app = create_app(run, token=token, version=version, provider=provider_name,
                     model=run.settings.model)

    async def watch_signals() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                stop.set()
                return

    async def until_stopped() -> None:
        await stop.wait()
        await shutdown_agents(run)

    async def http() -> None:
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(
                lambda task_status: hypercorn_serve(app, served_config(sock),
                                                    shutdown_trigger=until_stopped,
                                                    task_status=task_status))
            if on_ready is not None:
                on_ready(binds)
            task_status.started(binds)
            await stop.wait()
            nursery.cancel_scope.deadline = trio.current_time() + 10  # a stuck client

    async with trio.open_nursery() as outer:
        if threading_main():
            outer.start_soon(watch_signals)
        run.jobs.nursery = outer
        outer.start_soon(run.hub.run, lambda: run.changed, lambda: run.closing)
        if run.read_only or provider is None:
            await http()
        else:
            async with open_supervisor(run.root, provider, run.settings,
                                       started_by="mnemon serve",
                                       provider_name=provider_name) as sup:
                run.sup = sup
                sup.text_listeners.append(run.on_text)
                if resume:
                    resume_crashed(run)
                try:
                    await http()
                finally:
                    run.sup = None
        outer.cancel_scope.cancel()


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
