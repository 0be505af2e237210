"""An external agent CLI (`codex exec`, `claude -p`, …) run once per turn in a fresh workspace.

Each call to `complete` makes a temporary workspace holding the skill as an agent skill where each
agent looks for one (`.agents/skills/babyvision/SKILL.md` for Codex,
`.claude/skills/babyvision/SKILL.md` for Claude Code), the task text (`task.md`), copies of the
images (`attachments/`) and their list (`ATTACHMENTS.md`); then runs the agent command template
(`exec_cmd`, checked by `agent_argv` before any work) in it. The template is split like a shell
would split it but run without a shell, each placeholder replaced inside its own argument, so a
prompt with spaces, quotes or braces stays one argument and is never interpreted; `{system}` (or
`{system_toml}`, for Codex's `-c`) puts the system text on the agent's command line for agents
that take instructions there. The agent's stdin is an empty pipe (agents such as `codex exec` read
a stdin that is not a terminal into the prompt; a path such as /dev/null need not be empty). The
reply is what the agent wrote to `{last_message}`, else its stdout; a failure quotes the tails of
both (agents write their errors to either). The agent runs in its own process group, which is
killed as a whole on a timeout, on cancellation and after the agent exits, so no stray process
outlives its turn.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bv.core import environment, redaction
from bv.core.errors import BadConfig, Fatal, ItemFailure, NoReply, Refused
from bv.core.images import ImageError, ImageOptions, encode_image, image_paths
from bv.core.records import message_text
from bv.core.terminal import printable
from bv.engine.backends import BackendBase, Reply
from bv.engine.backends.exec_names import program_index, program_name, template_model
from bv.engine.backends.exec_transcript import Transcript, read_transcript
from bv.engine.defaults import TIMEOUT_S

SKILL_NAME = "babyvision"
SKILL_DESCRIPTION = (
    "How to answer a visual question for young children about the attached image:"
    " how to look, how to reason, and how to give the final answer."
)
PLACEHOLDERS = ("workdir", "prompt", "image", "model", "last_message", "system", "system_toml")
# Where each agent looks for skills in its workspace: Codex (and the open agent skills
# standard), Claude Code. The same SKILL.md serves both: name and description front matter.
SKILL_FOLDERS = (".agents/skills", ".claude/skills")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ANY_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
OUTPUT_TAIL = 400  # characters of stderr, and of stdout, quoted in an item's error
MAX_REPLY_BYTES = 1 << 20  # a reply read from stdout or the last-message file keeps its last MiB
_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
NO_RESIZE = ImageOptions()
AGENT_FIX = (
    "Run the agent by hand in a workspace kept with BV_EXEC_KEEP=DIR, and check its login or API key,"
    " the model name and the flags in `exec_cmd`."
)


@dataclass
class Workspace:
    """What the agent is given: the folder, the task text and the first image, if any."""

    path: Path
    prompt: str
    images: list[Path]
    system: str  # the system text, whole: for a template's {system}

    @property
    def image(self) -> Path | None:
        return self.images[0] if self.images else None


class ExecBackend(BackendBase):
    name = "exec"
    settings = ("model", "api_key", "exec_cmd", "keep_workdirs")
    cacheable = True  # an agent run is slow and costly; the key covers messages, params and template

    def __init__(
        self,
        template: str,
        argv: list[str],
        model: str,
        timeout: float = TIMEOUT_S,
        keep_dir: Path | None = None,
    ) -> None:
        self.template = template
        self.argv = argv
        self.model = model
        self.timeout = timeout
        self.keep_dir = keep_dir  # None: remove each workspace after its turn
        digest = hashlib.sha256(template.encode()).hexdigest()[:12]
        # The agent's name (not `env`'s), and a hash of the whole template (its flags change the replies).
        self.endpoint = f"{program_name(argv)} template:{digest}"
        self.cache_scope = self.endpoint  # another command template is another agent

    @classmethod
    def config_from(cls, rollout: Any) -> dict[str, Any]:
        agent_argv(rollout.exec_cmd, rollout.model)  # a template that cannot run: BadConfig now
        return {
            "exec_cmd": rollout.exec_cmd,
            "model": rollout.model,
            "timeout": rollout.timeout,
            "api_key": rollout.api_key,
            "keep_workdirs": rollout.keep_workdirs,
        }

    @classmethod
    def from_config(
        cls,
        exec_cmd: str | None = None,
        model: str | None = None,
        timeout: float = TIMEOUT_S,
        api_key: str | None = None,
        keep_workdirs: str | Path | None = None,
    ) -> ExecBackend:
        argv = agent_argv(exec_cmd, model)
        assert exec_cmd is not None  # agent_argv refuses a missing one
        redaction.register(api_key)
        for name, value in environment.variables().items():
            if name.endswith(_SECRET_SUFFIXES) and len(value) >= 16:
                redaction.register(value)  # agents inherit the environment and may echo their keys
        keep = keep_workdirs or environment.text("BV_EXEC_KEEP")
        return cls(
            exec_cmd,
            argv,
            model or template_model(argv) or program_name(argv),
            timeout=timeout,
            keep_dir=Path(keep).expanduser() if keep else None,
        )

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Reply:
        started = time.monotonic()
        workdir = self._new_workdir(messages, params.get("run", 0))
        try:
            try:
                options = ImageOptions(max_pixels=params.get("max_pixels"))
                space = await asyncio.to_thread(prepare_workspace, workdir, messages, options)
            except ImageError as exc:
                raise ItemFailure(f"image: {exc}") from None
            last_message = workdir / "last_message.txt"
            argv = self._argv(space, last_message)
            images = tuple(str(p.relative_to(workdir)) for p in space.images)
            content, said = await self._run(argv, workdir, last_message, images)
        finally:
            if self.keep_dir is None:
                shutil.rmtree(workdir, ignore_errors=True)
        return Reply(
            content=content,
            finish_reason="stop",
            usage=said.usage if said else {},
            latency_s=time.monotonic() - started,
            model=said.model if said and said.model else self.model,
            image_opened=said.image_opened if said else None,
        )

    def _new_workdir(self, messages: list[dict[str, Any]], run: int) -> Path:
        if self.keep_dir is None:
            return Path(tempfile.mkdtemp(prefix="bv-exec-"))
        # Kept workspaces are named by the task, run and turn, so they can be found again.
        self.keep_dir.mkdir(parents=True, exist_ok=True)
        first = next((m for m in messages if m.get("role") == "user"), {})
        task = hashlib.sha256(message_text(first.get("content")).encode()).hexdigest()[:10]
        turn = sum(m.get("role") == "assistant" for m in messages)
        return Path(tempfile.mkdtemp(prefix=f"{task}-r{run}-t{turn}-", dir=self.keep_dir))

    def _argv(self, space: Workspace, last_message: Path) -> list[str]:
        values = {
            "workdir": str(space.path),
            "prompt": space.prompt,
            "image": str(space.image) if space.image else None,
            "model": self.model,
            "last_message": str(last_message),
            "system": space.system,
            "system_toml": toml_string(space.system),
        }

        def fill(match: re.Match[str]) -> str:
            value = values[match.group(1)]
            if value is None:
                raise ItemFailure("`exec_cmd` uses {image} but this item has no image")
            return value

        # One pass per argument: a value is never searched again, so a prompt holding
        # "{workdir}" or "\boxed{A}" reaches the agent exactly as written.
        return [_PLACEHOLDER.sub(fill, arg) for arg in self.argv]

    async def _run(
        self, argv: list[str], workdir: Path, last_message: Path, images: tuple[str, ...]
    ) -> tuple[str, Transcript | None]:
        """The agent's reply (its last-message file, else its transcript's answer, else its
        stdout) and its transcript, if stdout is one (bv/engine/backends/exec_transcript.py)."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            # Files, not pipes: a grandchild that keeps a pipe open could not make us wait.
            # Stdin: a pipe whose writing end is closed, so a read ends at once, empty.
            empty, writer = os.pipe()
            os.close(writer)
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    cwd=workdir,
                    stdin=empty,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,  # its own process group, killed as a whole
                )
            except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
                raise Fatal(_not_found(argv[0], exc)) from None
            finally:
                os.close(empty)
            try:
                await asyncio.wait_for(proc.wait(), self.timeout)
            except TimeoutError:
                raise NoReply(f"agent timed out after {self.timeout:g} s") from None
            finally:
                # On a timeout, on cancellation (the engine's own timeout, Ctrl-C), and after a
                # normal exit too, for whatever the agent left running in its group.
                _kill_group(proc.pid)
                if proc.returncode is None:
                    try:
                        await asyncio.wait_for(proc.wait(), 5)  # reap it; SIGKILL makes this quick
                    except TimeoutError:
                        pass
            code = proc.returncode
            if code != 0:
                how = (
                    f"killed by signal {-code}"
                    if code is not None and code < 0
                    else f"exited with code {code}"
                )
                streams = (("stderr", err), ("stdout", out))
                said = [f"{name}: {tail}" for name, f in streams if (tail := _quoted(f))]
                raise Refused(f"agent {how}; " + ("; ".join(said) or "no output"), AGENT_FIX)
            transcript = read_transcript(out, images, MAX_REPLY_BYTES)
            written = _read_tail(last_message)
            if written.strip():
                return written, transcript
            if transcript is not None and transcript.reply is not None:
                return transcript.reply.strip(), transcript
            return _tail(out, MAX_REPLY_BYTES).strip(), transcript  # JSON, but no answer in it: as printed


def prepare_workspace(
    workdir: Path, messages: list[dict[str, Any]], options: ImageOptions = NO_RESIZE
) -> Workspace:
    """Write the skill, the task, the attachments and their list into `workdir`."""
    system = next((m for m in messages if m.get("role") == "system"), None)
    system_text = message_text(system.get("content")) if system else ""
    preamble, skill = split_skill(system_text)
    markdown = skill_markdown(preamble, skill)
    for folder in SKILL_FOLDERS:
        skill_dir = workdir / folder / SKILL_NAME
        skill_dir.mkdir(parents=True)
        (skill_dir / "SKILL.md").write_text(markdown, encoding="utf-8")

    attachments = workdir / "attachments"
    attachments.mkdir()
    paths: list[Path] = []
    for source in dict.fromkeys(image_paths(messages)):  # each image once, in order
        encoded = encode_image(source, options)  # the bytes a chat backend would send
        mime, _, data = encoded.removeprefix("data:").partition(";base64,")
        target = attachments / f"image-{len(paths) + 1}.{_EXTENSIONS.get(mime, 'png')}"
        target.write_bytes(base64.b64decode(data))
        paths.append(target)
    listing = [
        f"- `attachments/{p.name}`: image {i} of {len(paths)} for the question in task.md"
        for i, p in enumerate(paths, 1)
    ]
    (workdir / "ATTACHMENTS.md").write_text(
        "# Attachments\n\n" + ("\n".join(listing) if listing else "This task has no attachments.") + "\n",
        encoding="utf-8",
    )
    prompt = task_text(messages, [p.relative_to(workdir) for p in paths])
    (workdir / "task.md").write_text(prompt, encoding="utf-8")
    return Workspace(workdir, prompt, paths, system_text.strip())


def split_skill(system: str) -> tuple[str, str | None]:
    """The system prompt without its `## Skill` section, and that section's text (None if absent).

    The section ends where bv's system template resumes after its skill slot (the last
    occurrence of that heading), so a skill may have `## ` headings of its own; a system
    prompt from elsewhere falls back to the next `## ` heading.
    """
    match = re.search(r"^## Skill[ \t]*$", system, re.MULTILINE)
    if match is None:
        return system.strip(), None
    rest = system[match.end() :]
    end = None
    resume = _template_heading_after_skill()
    if resume:
        found = [m.start() for m in re.finditer(rf"^{re.escape(resume)}[ \t]*$", rest, re.MULTILINE)]
        end = found[-1] if found else None
    if end is None:
        heading = re.search(r"^## ", rest, re.MULTILINE)
        end = heading.start() if heading else len(rest)
    preamble = system[: match.start()].rstrip() + "\n\n" + rest[end:].lstrip()
    return preamble.strip(), rest[:end].strip()


def _template_heading_after_skill() -> str | None:
    """The first `## ` heading of bv's system template after its `{{skill}}` slot, if any."""
    try:
        from bv.core.templates import packaged

        after = packaged("system").split("{{skill}}", 1)[1]
    except (ImportError, OSError, IndexError):
        return None
    heading = re.search(r"^## .*$", after, re.MULTILINE)
    return heading.group(0).rstrip() if heading else None


def skill_markdown(preamble: str, skill: str | None) -> str:
    """SKILL.md: front matter (name, description), a preamble, then the skill or a no-guidance line."""
    guidance = skill or "There is no extra guidance for this task: follow the instructions above."
    parts = [
        "---",
        f"name: {SKILL_NAME}",
        f"description: {_yaml_quote(SKILL_DESCRIPTION)}",
        "---",
        "",
        "# Visual questions for young children",
        "",
        "Use this skill for the task in `task.md`: one question about the image in `attachments/`"
        " (listed in `ATTACHMENTS.md`). Open and inspect the image before you answer.",
    ]
    if preamble:
        parts += ["", preamble]
    parts += ["", "## Skill", "", guidance, ""]
    return "\n".join(parts)


def task_text(messages: list[dict[str, Any]], attachments: list[Path]) -> str:
    """task.md: the user text; on later turns the previous attempt and the follow-up; where files are."""
    chat = [m for m in messages if m.get("role") in ("user", "assistant")]
    first = next((i for i, m in enumerate(chat) if m["role"] == "user"), None)
    parts = [] if first is None else [message_text(chat[first].get("content")).strip()]
    for message in chat if first is None else chat[first + 1 :]:
        heading = "## Your Previous Attempt" if message["role"] == "assistant" else "## Follow-up"
        parts.append(f"{heading}\n\n{message_text(message.get('content')).strip() or '(empty)'}")
    files = [f"- Image: `{p}` (every attachment is listed in `ATTACHMENTS.md`)." for p in attachments[:1]]
    files.append(
        f"- Guidance for these tasks: the skill `{SKILL_NAME}`"
        f" (`{SKILL_FOLDERS[0]}/{SKILL_NAME}/SKILL.md`, also in `{SKILL_FOLDERS[1]}/`)."
    )
    parts.append("## Workspace\n\n" + "\n".join(files))
    return "\n\n".join(p for p in parts if p) + "\n"


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (for Codex's `-c key=VALUE`, which parses VALUE as TOML):
    JSON's escapes are TOML's, and DEL, which JSON leaves bare, is escaped too."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _yaml_quote(text: str) -> str:
    """A YAML single-quoted scalar: backslashes stay literal, quotes are doubled."""
    return "'" + " ".join(text.split()).replace("'", "''") + "'"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _tail(f: IO[bytes], limit: int) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - limit))
    return f.read().decode("utf-8", errors="replace")


def _quoted(f: IO[bytes]) -> str:
    """The tail of an agent's output for an error message: redacted, control characters escaped."""
    text = redaction.redact(_tail(f, 4 * OUTPUT_TAIL).strip())
    return ("…" if len(text) > OUTPUT_TAIL else "") + printable(text[-OUTPUT_TAIL:])


def _read_tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return _tail(f, MAX_REPLY_BYTES).strip()
    except OSError:
        return ""


def agent_argv(exec_cmd: str | None, model: str | None) -> list[str]:
    """The agent command's arguments, checked before any work: BadConfig when the template cannot
    run (no template, quotes that do not close, an unknown placeholder, {model} without a model,
    a program that is not there). A relative program path is made absolute: the agent runs in
    its workspace."""
    if not exec_cmd or not exec_cmd.strip():
        raise BadConfig(
            "the exec backend needs `exec_cmd` TEMPLATE, e.g. `exec_cmd` 'codex exec -C {workdir}"
            " --image {image} --output-last-message {last_message} {prompt}'",
            option="exec_cmd",
        )
    try:
        argv = shlex.split(exec_cmd)
    except ValueError as exc:
        raise BadConfig(f"`exec_cmd` cannot be split into arguments: {exc}", option="exec_cmd") from None
    if not argv:
        raise BadConfig("`exec_cmd` names no program", option="exec_cmd")
    unknown = sorted({m for arg in argv for m in _ANY_PLACEHOLDER.findall(arg)} - set(PLACEHOLDERS))
    if unknown:
        raise BadConfig(
            f"`exec_cmd` has unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)};"
            f" known: {' '.join('{' + p + '}' for p in PLACEHOLDERS)}",
            option="exec_cmd",
        )
    if not model and any("{model}" in arg for arg in argv):
        raise BadConfig(
            "`exec_cmd` uses {model} but no model was given: use `model` or set BV_MODEL", option="model"
        )
    for at in dict.fromkeys((0, program_index(argv))):  # `env` and the agent it runs
        program = argv[at]
        if not _PLACEHOLDER.search(program):
            if shutil.which(program) is None:
                raise BadConfig(_not_found(program), option="exec_cmd")
            if os.sep in program:
                argv[at] = os.path.abspath(program)
    return argv


def _not_found(program: str, exc: OSError | None = None) -> str:
    why = f" ({exc.strerror})" if exc is not None and exc.strerror else ""
    return (
        f"the agent command {program!r} from `exec_cmd` cannot be run{why}: is it installed and on"
        " PATH? (a relative path is taken from the folder bv runs in)"
    )
