"""The tests' own layout (tests/README.md): test files in the folder of the layer they test, none
loose in tests/, names unique across folders, and no test file importing another one or conftest
(what two files share is a fixture in conftest.py or a module in tests/support/)."""

from __future__ import annotations

import ast
import re
from collections import Counter

from support.paths import SUPPORT, TESTS

TEST_FILES = sorted(TESTS.rglob("test_*.py"))


def test_no_test_file_is_loose_in_tests():
    loose = [p.name for p in TESTS.glob("test_*.py")]
    assert not loose, f"{loose}: put each in the tests/ folder of the layer it tests (tests/README.md)"


def test_every_test_folder_is_in_the_readme():
    readme = (TESTS / "README.md").read_text()
    listed = set(re.findall(r"^\| `(\w+)/` \|", readme, re.M))
    folders = {p.parent.name for p in TEST_FILES}
    assert folders <= listed, f"tests/README.md's table lacks {sorted(folders - listed)}"


def test_test_file_names_are_unique_across_folders():
    """pytest imports a test file by its base name (rootdir-relative "prepend" mode): two files of
    one name in two folders fail to import."""
    twice = [name for name, n in Counter(p.name for p in TEST_FILES).items() if n > 1]
    assert not twice, f"{twice}: name each after the module it tests"


def test_no_test_file_imports_another_or_conftest():
    found = []
    for path in [*TEST_FILES, *SUPPORT.glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [
                f"{path.relative_to(TESTS)}:{node.lineno} imports {name}"
                for name in names
                if name == "conftest" or name.split(".")[-1].startswith("test_")
            ]
    assert not found, f"{found}: move what they share into tests/support/ (or a conftest.py fixture)"
