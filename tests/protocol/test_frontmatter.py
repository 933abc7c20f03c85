"""A SKILL.md's frontmatter read (PyYAML, or the small reader) and compared field by field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from trio_mcp.protocol import check_frontmatter
from trio_mcp.protocol._frontmatter import (
    FrontmatterError,
    frontmatter_differences,
    read_frontmatter,
    same,
)

READERS = pytest.mark.parametrize("use_pyyaml", [False, True], ids=["small", "pyyaml"])

DOCUMENT = """\
name: pdf
description: Work with PDF files.
license: "Apache-2.0"
metadata:
  version: "2.1.0"
  tags: [a, "b c", 3]
  nested:
    deep: true   # a comment
allowed-tools: Bash(git:*) Read
list:
  - one
  - 'two''s'
  - key: v
    other: 2
same-indent:
- x
- y
wrapped: This is a long
  description, continued.
folded: >
  line one
  line two

  para two
literal: |-
  keep
    indented
flow: {a: 1, "b": [x, y]}
empty:
tilde: ~
escapes: "tab\\tand \\u00e9"
"""


@READERS
def test_what_yaml_means_is_what_the_entry_must_say(use_pyyaml: bool) -> None:
    entry = yaml.safe_load(DOCUMENT)  # what a server renders as the entry's JSON
    found = read_frontmatter(DOCUMENT, use_pyyaml=use_pyyaml)
    assert set(found) == set(entry)
    assert [key for key in entry if not same(found[key], entry[key])] == []
    assert found["folded"] == "line one line two\npara two\n"
    assert found["literal"] == "keep\n  indented"
    assert found["wrapped"] == "This is a long description, continued."
    assert found["escapes"] == "tab\tand é"


@READERS
def test_every_differing_missing_or_extra_field_is_named(use_pyyaml: bool) -> None:
    text = "---\nname: pdf\ndescription: Old.\nlicense: MIT\nmetadata: {v: 1}\n---\nBody\n"
    entry = {"name": "pdf", "description": "New.", "metadata": {"v": 2}, "extra": [1]}
    assert frontmatter_differences(text, entry, use_pyyaml=use_pyyaml) == (
        "description: the SKILL.md says 'Old.' where the entry says 'New.'",
        "extra: the SKILL.md does not have it; the entry says [1]",
        "license: the SKILL.md says 'MIT'; the entry does not have it",
        "metadata: the SKILL.md says {'v': '1'} where the entry says {'v': 2}",
    )
    good = {"name": "pdf", "description": "Old.", "license": "MIT", "metadata": {"v": 1}}
    assert frontmatter_differences(text, good, use_pyyaml=use_pyyaml) == ()


@READERS
def test_plain_scalars_match_what_they_can_mean_quoted_ones_only_strings(
    use_pyyaml: bool,
) -> None:
    found = read_frontmatter(
        "v: 1.0\nflag: yes\nnone:\nhex: 0x1F\nq: 'true'\nn: '3'", use_pyyaml=use_pyyaml
    )
    for key, value in (("v", 1.0), ("v", "1.0"), ("flag", True), ("flag", "yes")):
        assert same(found[key], value), (key, value)
    assert same(found["none"], None) and same(found["hex"], 31)
    for key, value in (("q", True), ("n", 3), ("v", 2), ("flag", False), ("hex", "31")):
        assert not same(found[key], value), (key, value)


def test_check_frontmatter_says_what_differs() -> None:
    entry = {"name": "pdf", "description": "Work with PDF files."}
    assert (
        check_frontmatter("---\nname: pdf\ndescription: Work with PDF files.\n---\n", entry) is None
    )
    assert check_frontmatter("# no block", entry) == (
        "it does not start with a YAML frontmatter block (---)"
    )
    text = "---\nname: pdf\ndescription: Work with PDF files.\nallowed-tools: Bash\n---\n"
    assert check_frontmatter(text, entry) == (
        "its frontmatter differs from the entry's: allowed-tools: the SKILL.md says 'Bash'; "
        "the entry does not have it"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a: &x 1\nb: *x", "anchors, aliases or tags"),
        ("a: 'open", "does not end on its line"),
        ("a: 1\n  b: 2", "indented more than its field"),
        ("- a\n- b", "not a mapping"),
        ("a: 1\na: 2", "the key 'a' twice"),
        ("a: [1, 2", "not closed"),
        ('a: "\\q"', "unknown escape"),
    ],
)
def test_the_small_reader_refuses_what_it_does_not_read(text: str, reason: str) -> None:
    with pytest.raises(FrontmatterError, match=reason):
        read_frontmatter(text, use_pyyaml=False)


def test_aliases_are_followed_within_bounds_with_pyyaml() -> None:
    assert read_frontmatter("a: &x [1]\nb: *x", use_pyyaml=True) == {"a": ["1"], "b": ["1"]}
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(6)
    )
    with pytest.raises(FrontmatterError, match="more than 10,000 nodes"):
        read_frontmatter(bomb, use_pyyaml=True)
    with pytest.raises(FrontmatterError, match="not valid YAML"):
        read_frontmatter("a: [", use_pyyaml=True)


def test_the_protocol_layer_does_not_import_yaml() -> None:
    code = "import sys, trio_mcp.protocol; print(json.dumps('yaml' in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) is False
