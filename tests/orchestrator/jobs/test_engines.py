"""The engines behind one shape (decision 0335): chosen once by ``engine_for``, asked by
``prepare`` and the fronts, never named; each engine's module imported only when chosen."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

from mnemon.orchestrator.engines import ENGINES, Engine, engine_for
from mnemon.orchestrator.jobs.build import load, prepare
from mnemon.orchestrator.jobs.spec import JobError

from .kit import write_job


def test_each_name_is_one_engine_and_no_name_is_the_jobs_choice(tmp_path):
    assert [engine_for(n).name for n in ENGINES] == list(ENGINES)
    assert [engine_for(n).in_process for n in ENGINES] == [True, False, True]
    plain, _ = load(write_job(tmp_path / "a", "", tasks=1))
    batch, _ = load(write_job(tmp_path / "b", '[provider]\nname = "anthropic"\nbatch = true\n',
                              tasks=1))
    assert engine_for(None).name == engine_for(None, plain).name == "local"
    assert engine_for(None, batch).name == "batch"
    assert engine_for("local", batch).name == "local"  # a name given wins over the job's
    chosen = engine_for("dask")
    assert engine_for(chosen) is chosen  # a caller that chose already
    with pytest.raises(ValueError, match="no engine 'remote'"):
        engine_for("remote")


def test_prepare_leaves_its_engine_on_the_runner_and_the_engine_runs_it(tmp_path):
    job = write_job(tmp_path / "j", "", tasks=2)
    runner, provider = prepare(job, watch_sigint=False, engine=None)
    assert type(runner.engine).__name__ == "LocalEngine" and provider is runner.sup.provider

    async def main():
        try:
            return await runner.engine.run(runner, provider)
        finally:
            await provider.aclose()

    summary = trio.run(main)
    assert summary.done == 2
    assert runner.engine.summary_extra(provider, runner.root) == {}
    assert runner.engine.summary_line({}) is None and runner.engine.progress(provider) == ""


def test_an_engine_that_cannot_carry_the_runs_own_settings_refuses_them(tmp_path):
    dask = engine_for("dask")
    assert "--policy is for --engine local" in dask.refuses_options(policy=True)
    assert "--roles and --role are for --engine local" in dask.refuses_options(roles=True)
    assert dask.refuses_options() is None
    assert all(engine_for(n).refuses_options(policy=True, roles=True) is None
               for n in ("local", "batch"))
    job = write_job(tmp_path / "j", "", tasks=1)
    with pytest.raises(JobError, match="--roles and --role are for --engine local"):
        prepare(job, watch_sigint=False, engine=dask, role="critic")
    assert not (tmp_path / "j" / "job.run").exists(), "refused before anything was written"


def test_the_batch_engine_refuses_a_provider_without_a_batch_api(tmp_path):
    job = write_job(tmp_path / "j", "", tasks=1)
    with pytest.raises(JobError, match='--engine batch needs .*the scripted provider has no '
                                       'batch API'):
        prepare(job, watch_sigint=False, engine="batch")
    assert not (tmp_path / "j" / "job.run").exists()


def test_an_engine_is_imported_only_when_chosen():
    done = subprocess.run([sys.executable, "-c", """
import sys
from mnemon.orchestrator.engines import engine_for
engine_for("local")
print(sorted(m for m in sys.modules if m.startswith("mnemon.orchestrator.engines.")
             or m in ("httpx", "distributed", "mnemon.orchestrator.batch.waves")))
"""], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == ("['mnemon.orchestrator.engines.base', "
                                          "'mnemon.orchestrator.engines.local']")


def test_the_shape_defaults_are_the_local_engine():
    local = engine_for("local")
    assert type(local).__mro__[1] is Engine
    assert not [k for k in vars(type(local)) if not k.startswith("_") and k != "name"]
