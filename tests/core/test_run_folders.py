"""Run folders are owned (bv.core.run_folder): `bv eval -o` and `bv optimize --out` refuse a folder
that holds something else, one writer at a time (a flock a killed run does not leave held), a
config.json read as data, a dangling symlink and a full disk said with their path, and `-p`
secrets never recorded. Against the loopback server, as users type the commands."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import threading

import pytest
from support.commands import BIN, bv_inproc, jsonl
from support.evaluating import eval_command, respond
from support.fakeopenai import Reply
from support.waiting import wait_for

from bv.core.errors import Fatal
from bv.optimize.rundir import RunFolder


def test_eval_refuses_a_folder_of_the_user_s_own_files_and_leaves_them(sample_dir, server, tmp_path):
    server.responder = respond
    out = tmp_path / "mine"
    (out / "logs").mkdir(parents=True)
    mine = {"report.md": "my notes\n", "results.jsonl": '{"mine": 1}\n', "logs/rollout.log": "my log\n"}
    for name, text in mine.items():
        (out / name).write_text(text)
    result = bv_inproc(eval_command(sample_dir, server, out, "--mode rules"))
    assert result.returncode == 2, result.stderr
    assert f"{out} holds files that are not a bv eval run (config.json absent)" in result.stderr
    assert "give another -o" in result.stderr or "give another --out" in result.stderr, result.stderr
    assert {name: (out / name).read_text() for name in mine} == mine  # nothing overwritten or appended
    assert not server.seen and not (out / ".bv.lock").exists()


def test_eval_and_optimize_refuse_each_other_s_folders(sample_dir, server, tmp_path):
    server.responder = respond
    out = tmp_path / "run"
    assert bv_inproc(eval_command(sample_dir, server, out, "--mode rules")).returncode == 0
    (tmp_path / "seed.md").write_text("Look closely.\n")
    refused = bv_inproc(
        f"bv optimize {sample_dir}/meta_data.jsonl --skill {tmp_path}/seed.md --out {out}"
        f" -m m --base-url {server.base_url} --optimizer-model w --optimizer-base-url {server.base_url}"
        " --mode rules --cache " + str(tmp_path / "c.sqlite")
    )
    assert refused.returncode == 2, refused.stderr
    assert f"{out} holds a bv eval run; bv optimize writes only into a new or empty folder" in refused.stderr
    assert not (out / "run.json").exists()
    other = tmp_path / "opt"
    other.mkdir()
    (other / "run.json").write_text("{}\n")
    again = bv_inproc(eval_command(sample_dir, server, other, "--mode rules"))
    assert again.returncode == 2 and f"{other} holds a bv optimize run" in again.stderr


def test_an_empty_folder_is_taken(sample_dir, server, tmp_path):
    server.responder = respond
    out = tmp_path / "empty"
    out.mkdir()
    assert bv_inproc(eval_command(sample_dir, server, out, "--mode rules")).returncode == 0
    assert (out / "config.json").exists() and (out / "results.jsonl").exists()


def test_a_folder_another_run_is_writing_into_is_refused(sample_dir, server, tmp_path):
    """Two bv eval into one folder: the second is refused while the first runs (exit 2, nothing
    sent), and the first finishes with its own config.json."""
    release = threading.Event()
    server.responder = lambda seen: Reply(content="\\boxed{A}", release=release)
    out = tmp_path / "run"
    command = eval_command(sample_dir, server, out, "--mode rules", "-j 2")
    first = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
    )
    try:
        wait_for(lambda: server.in_flight == 2)
        sent = len(server.seen)
        second = bv_inproc(command.replace("--mode rules", "--mode rules --repeats 2"))
        assert second.returncode == 2, second.stderr
        assert f"{out}: another bv eval is writing into this folder now" in second.stderr
        assert len(server.seen) == sent  # refused before anything was sent
    finally:
        release.set()
    assert first.wait(60) == 0, first.stderr.read().decode() if first.stderr else ""
    config = json.loads((out / "config.json").read_text())
    assert config["options"]["repeats"] == 1
    assert len(jsonl((out / "results.jsonl").read_text())) == len(
        (sample_dir / "meta_data.jsonl").read_text().splitlines()
    )


def test_a_held_lock_refuses_bv_optimize_and_a_released_one_does_not(tmp_path):
    """The lock is the kernel's (flock): held, a second writer is refused; closed (as when the
    process holding it is killed), it is free again."""
    from bv.core.run_folder import FolderRefused

    folder = RunFolder(tmp_path / "run")
    with folder.owned():
        with pytest.raises(FolderRefused, match="another bv optimize is writing into this folder"):
            with RunFolder(tmp_path / "run").owned():
                pass
    holder = (
        "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT);"
        " fcntl.flock(fd, fcntl.LOCK_EX); print(1, flush=True); time.sleep(60)"
    )
    lock = str(folder.path / ".bv.lock")
    killed = subprocess.Popen(["python3", "-c", holder, lock], stdout=subprocess.PIPE)
    assert killed.stdout and killed.stdout.readline() == b"1\n"
    with pytest.raises(FolderRefused):
        with folder.owned():
            pass
    killed.kill()
    killed.wait()
    with folder.owned():  # a killed holder leaves nothing held
        fd = os.open(folder.path / ".bv.lock", os.O_RDWR)
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(fd)


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ('{"options": 1, "items_sha256": "x"}', "its options are not a JSON object"),
        ("[1, 2]", "not a JSON object"),
        ('"a string"', "not a JSON object"),
    ],
)
def test_a_config_json_that_is_not_a_record_is_refused_not_replaced(
    sample_dir, server, tmp_path, config, why
):
    server.responder = respond
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(config)
    result = bv_inproc(eval_command(sample_dir, server, out, "--mode rules"))
    assert result.returncode == 2, result.stderr
    assert f"{out / 'config.json'} is not the configuration of a bv eval run ({why})" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert (out / "config.json").read_text() == config and not server.seen


def test_out_onto_a_dangling_symlink_or_a_file_is_said_plainly(sample_dir, server, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    result = bv_inproc(eval_command(sample_dir, server, link, "--mode rules"))
    assert result.returncode == 2, result.stderr
    assert f"{link} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist" in result.stderr
    assert "Errno" not in result.stderr
    a_file = tmp_path / "file"
    a_file.write_text("x")
    result = bv_inproc(eval_command(sample_dir, server, a_file, "--mode rules"))
    assert result.returncode == 2 and f"'{a_file}' is a file" in result.stderr  # click's own check
    assert a_file.read_text() == "x"
    from bv import api
    from bv.core.run_folder import FolderRefused

    with pytest.raises(FolderRefused, match=f"{a_file} is not a folder"):
        api.evaluate(
            sample_dir / "meta_data.jsonl", a_file, model="m", base_url=server.base_url, mode="rules"
        )


@pytest.fixture
def full_disk(tmp_path):
    """A 64 kB tmpfs, filled to the last byte."""
    if os.geteuid() != 0:
        pytest.skip("a full disk is made with a tiny tmpfs, which needs root to mount")
    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    (mount / "run").mkdir()
    (mount / "run" / "history.jsonl").write_text('{"step": 0, "kind": "seed"}\n')
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
    with pytest.raises(OSError):
        while True:
            os.write(fd, b"\0" * 4096)
    os.close(fd)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_while_writing_history_names_the_file(full_disk):
    folder = RunFolder(full_disk / "run")
    with pytest.raises(Fatal) as caught:
        folder.append_history({"step": 1, "kind": "step", "text": "x" * 20_000})
    assert str(caught.value) == f"cannot write {folder.history_path}: No space left on device"
    assert folder.history() == [{"step": 0, "kind": "seed"}]  # the partial line, if any, dropped


SECRET_PARAM = "sk-param-secret-0123456789abcdef"


def test_a_secret_given_as_a_request_parameter_is_in_no_file(sample_dir, server, tmp_path):
    """`-p api_key=…` (and token, secret, password, authorization) is sent as given and recorded
    as ***; `max_tokens`-like names are not secrets."""
    server.responder = respond
    out = tmp_path / "run"
    params = (
        f"-p api_key={SECRET_PARAM} -p access_token=tok-{SECRET_PARAM} -p X-Password=pw-{SECRET_PARAM}"
        " -p max_completion_tokens=77 -p top_k=3"
    )
    judge = f"--judge-param authorization=Bearer-{SECRET_PARAM}"
    result = bv_inproc(eval_command(sample_dir, server, out, "--mode llm", params, judge))
    assert result.returncode == 0, result.stderr
    sent = [s.body for s in server.seen]
    assert any(b.get("api_key") == SECRET_PARAM for b in sent)  # sent as the user asked
    assert any(b.get("authorization") == f"Bearer-{SECRET_PARAM}" for b in sent)
    for path in out.rglob("*"):
        assert not path.is_file() or SECRET_PARAM not in path.read_text(errors="replace"), path
    assert SECRET_PARAM not in result.stdout + result.stderr
    options = json.loads((out / "config.json").read_text())["options"]
    assert options["params"]["extra_body"] == {
        "api_key": "***", "access_token": "***", "X-Password": "***", "max_completion_tokens": 77, "top_k": 3,
    }  # fmt: skip
    assert options["judge_params"] == {"authorization": "***"}
    row = jsonl((out / "results.jsonl").read_text())[0]
    assert row["params"]["extra_body"]["api_key"] == "***" and row["params"]["extra_body"]["top_k"] == 3
    assert row["judge_params"]["authorization"] == "***"
    assert "api_key" in (out / "report.md").read_text()  # the report still says which were given


def test_which_names_are_secret():
    from bv.core.redaction import secret_name

    secret = ["api_key", "apiKey", "X-Api-Key", "key", "access_token", "token", "client_secret",
              "password", "passwd", "Authorization", "auth", "credentials"]  # fmt: skip
    plain = ["max_tokens", "max_completion_tokens", "top_k", "keyword", "monkey", "seed", "tokens"]
    assert [n for n in secret if not secret_name(n)] == []
    assert [n for n in plain if secret_name(n)] == []
