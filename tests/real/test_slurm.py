"""bv in a real single-node SLURM (Debian's slurm-wlm and munge, started here as root on
loopback ports of their own): a `--shard auto` job array whose merge is exactly the unsharded
run, a resubmitted task (`sbatch --array=2`) that bv refuses, and a missing shard that
`bv merge` warns about (and fails on under --strict). docs/scale.md shows these commands."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import BIN, jsonl, sh
from support.fakeopenai import FakeOpenAI, Reply
from support.real_parts import RAN_AGAINST, REAL, SKIPPED, free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
CONF = """\
ClusterName=bvtest
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""
JOB = """\
#!/bin/bash
#SBATCH --job-name=bv-eval
set -euo pipefail
mkdir -p "$PARTS"
bv prompt "$ITEMS" \\
  | bv rollout -m m --base-url "$BASE_URL" -j 4 --shard auto \\
      --cache "$CACHES/cache-${SLURM_ARRAY_TASK_ID}.sqlite" \\
  | bv judge > "$PARTS/part-${SLURM_ARRAY_TASK_ID}.jsonl"
"""


def skip(reason: str) -> None:
    SKIPPED["slurm"] = f"slurm: {reason}"
    pytest.skip(SKIPPED["slurm"])


def _pid_stop(pid_file: Path) -> None:
    try:
        os.kill(int(pid_file.read_text().split()[0]), 15)
    except (OSError, ValueError, IndexError):
        pass


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A running single-node cluster; yields the environment its commands need (SLURM_CONF)."""
    note = REAL / "slurm.unavailable"
    if note.exists():
        skip(note.read_text().strip())
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        skip(
            f"{', '.join(missing)} not installed (Debian's slurm-wlm and munge:"
            " `make test-real` installs them as root)"
        )
    if os.geteuid() != 0:
        skip("starting slurmctld, slurmd and munged here needs root")
    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("munge", "state", "spool", "log"):
        (folder / sub).mkdir()
    (folder / "munge").chmod(0o700)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    munge = folder / "munge"
    subprocess.run(
        [
            "munged", "--force", f"--socket={munge}/munge.socket", f"--key-file={key}",
            f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
            f"--seed-file={munge}/munged.seed",
        ],
        check=True,
    )  # fmt: skip
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(
        CONF.format(
            host=host, ctld_port=free_port(), d_port=free_port(), dir=folder, cpus=os.cpu_count() or 1
        )
    )
    env = {"SLURM_CONF": str(conf)}
    full = {**os.environ, **env}
    try:
        subprocess.run(["slurmctld", "-f", conf], check=True, env=full)
        subprocess.run(["slurmd", "-f", conf], check=True, env=full)
        deadline = time.monotonic() + 60
        while True:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=full)
            if state.stdout.strip() == "idle":
                break
            if time.monotonic() > deadline:
                logs = "".join(p.read_text()[-2000:] for p in (folder / "log").glob("*.log"))
                pytest.fail(
                    f"the node did not come up ({state.stdout.strip()} {state.stderr.strip()}):\n{logs}"
                )
            time.sleep(0.5)
        version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, env=full).stdout
        munged = subprocess.run(["munged", "--version"], capture_output=True, text=True).stdout
        RAN_AGAINST["slurm"] = f"{version.strip()} (slurmctld + slurmd, one node), {munged.strip()}"
        yield env
    finally:
        for pid_file in (folder / "slurmd.pid", folder / "slurmctld.pid", munge / "munged.pid"):
            _pid_stop(pid_file)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(lambda seen: Reply(content="\\boxed{A}"))
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def array(slurm, model, tmp_path_factory) -> dict:
    """`sbatch --array=0-3 --wait job.sh`, as docs/scale.md's SLURM array (its folders, its env)."""
    work = tmp_path_factory.mktemp("array")
    assert sh(f"bv synth --n 24 --seed 11 --out {work}/data").returncode == 0
    (work / "job.sh").write_text(JOB)
    env = {
        **slurm,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "ITEMS": str(work / "data" / "meta_data.jsonl"),
        "BASE_URL": model.base_url,
        "CACHES": str(work / "caches"),
    }
    (work / "caches").mkdir()
    (work / "logs").mkdir()  # SLURM writes the logs there, but makes no folder
    submitted = sh(
        f"sbatch --wait --array=0-3 --output={work}/logs/bv-%A_%a.log job.sh",
        cwd=work,
        env={**env, "PARTS": str(work / "parts")},
        timeout=600,
    )
    return {"work": work, "env": env, "submitted": submitted}


def test_a_sharded_array_merges_to_the_unsharded_run(array, model):
    work, submitted = array["work"], array["submitted"]
    logs = "".join(p.read_text() for p in sorted((work / "logs").glob("*.log")))
    assert submitted.returncode == 0, submitted.stderr + logs
    merged = sh(f"bv merge {work}/parts/part-*.jsonl --sort --strict -o {work}/results.jsonl")
    assert merged.returncode == 0, merged.stderr
    assert "shards 0-3 of 4" in merged.stderr
    whole = sh(
        f"bv prompt {work}/data/meta_data.jsonl | bv rollout -m m --base-url {model.base_url} --no-cache -q"
        " | bv judge -q"
    )
    assert whole.returncode == 0, whole.stderr
    rows = jsonl((work / "results.jsonl").read_text())
    assert sorted((r["id"], r["run"]) for r in rows) == sorted(
        (r["id"], r["run"]) for r in jsonl(whole.stdout)
    )
    assert {r["shard"] for r in rows} == {"0/4", "1/4", "2/4", "3/4"}


def test_a_resubmitted_task_is_refused_not_run_as_the_whole_set(array):
    work, env = array["work"], array["env"]
    again = sh(
        f"sbatch --wait --array=2 --output={work}/logs/resubmitted-%A_%a.log job.sh",
        cwd=work,
        env={**env, "PARTS": str(work / "resubmitted")},
        timeout=300,
    )
    assert again.returncode != 0  # the task failed: bv refused to start
    (log,) = (work / "logs").glob("resubmitted-*.log")
    said = log.read_text()
    assert "scontrol requeue" in said and "Traceback" not in said, said
    part = work / "resubmitted" / "part-2.jsonl"
    assert not part.exists() or part.read_text() == ""  # nothing run, so no item paid for twice


def test_a_missing_shard_is_warned_about(array):
    parts = array["work"] / "parts"
    three = f"{parts}/part-0.jsonl {parts}/part-1.jsonl {parts}/part-3.jsonl"
    warned = sh(f"bv merge {three} -o {array['work']}/three.jsonl")
    assert warned.returncode == 0 and "shard 2 of 4 missing (present: 0-1, 3)" in warned.stderr, warned.stderr
    strict = sh(f"bv merge {three} --strict -o {array['work']}/strict.jsonl")
    assert strict.returncode == 1 and "shard 2 of 4 missing" in strict.stderr
