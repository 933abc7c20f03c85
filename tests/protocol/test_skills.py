"""The skills extension's rules without I/O: entry checks, file verification, frontmatter."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.protocol import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SkillEntry,
    SkillResourceRef,
    check_frontmatter,
    check_skill_entry,
    resolve_skill_file,
    skill_digest,
    skill_directory,
    structure,
    verify_skill_file,
)

URI = "skill://acme/billing/refunds/SKILL.md"


def ref(uri: str = URI, data: bytes = b"x", **changes: Any) -> SkillResourceRef:
    fields: dict[str, Any] = {"uri": uri, "digest": skill_digest(data), "size": len(data)}
    fields.update(changes)
    return SkillResourceRef(**fields)


def entry(uri: str = URI, name: str = "refunds", resources: Any = None, **front: Any) -> SkillEntry:
    frontmatter = {"name": name, "description": "Refund a customer.", **front}
    if resources is None:
        resources = (ref(uri),)
    return SkillEntry(uri=uri, frontmatter=frontmatter, resources=resources)


def test_a_valid_entry_and_its_directory() -> None:
    assert check_skill_entry(entry()) is None
    assert check_skill_entry(entry(resources="dynamic")) is None
    assert skill_directory(URI) == "skill://acme/billing/refunds"
    assert skill_directory("skill://SKILL.md") is None
    assert skill_directory("github://o/r/skills/x/README.md") is None


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (entry(name="other"), "is not its frontmatter name ('other')"),
        (entry(uri="skill://refunds/README.md"), "is not <scheme>://<skill-path>/SKILL.md"),
        (entry(uri="refunds/SKILL.md", resources="dynamic"), "is not <scheme>"),
        (entry(uri="skill://a/../refunds/SKILL.md", resources="dynamic"), "is not <scheme>"),
        (entry(resources="static"), "got 'static'"),
        (SkillEntry(uri=URI, frontmatter={"name": "refunds", "description": "d"}), "got nothing"),
        (SkillEntry(uri=URI, frontmatter={"name": "refunds"}, resources="dynamic"), "description"),
        (entry(resources=(ref(digest="sha256:ABC"),)), "not sha256:<64 lowercase hex"),
        (entry(resources=(ref(), ref())), "is listed twice"),
        (entry(resources=(ref(), ref("skill://other/x.md"))), "is not inside the skill's"),
        (entry(resources=(ref("skill://acme/billing/refunds/a.md"),)), "do not list its own"),
        (entry(resources=(ref(size=200_000),)), "its SKILL.md has 200,000 bytes"),
    ],
)
def test_an_invalid_entry_says_why(bad: SkillEntry, reason: str) -> None:
    got = check_skill_entry(bad)
    assert got is not None and reason in got


def test_the_limits_are_checked_from_the_entry() -> None:
    many = tuple(ref(f"skill://acme/billing/refunds/f{i}") for i in range(MAX_SKILL_FILES))
    assert "513 files, over the limit of 512" in str(
        check_skill_entry(entry(resources=(ref(), *many)))
    )
    assert check_skill_entry(entry(resources=(ref(), *many[:-1]))) is None
    big = ref("skill://acme/billing/refunds/big", size=MAX_SKILL_BYTES)
    assert "over the limit of 16,777,216" in str(check_skill_entry(entry(resources=(ref(), big))))


def test_an_entry_from_the_wire_without_ttl_or_scope() -> None:
    raw = {
        "uri": URI,
        "frontmatter": {"name": "refunds", "description": "d", "license": "MIT"},
        "resources": [{"uri": URI, "digest": skill_digest(b"x"), "size": 1}],
    }
    decoded = structure(raw, SkillEntry)
    assert check_skill_entry(decoded) is None
    assert decoded.frontmatter["license"] == "MIT"


def test_a_file_is_verified_by_size_and_digest() -> None:
    good = ref(data=b"hello")
    assert verify_skill_file(b"hello", good) is None
    assert verify_skill_file(b"hell", good) == "it has 4 bytes where the manifest says 5"
    assert "its digest is sha256:" in str(verify_skill_file(b"jello", good))


def test_frontmatter_of_a_fetched_skill_md_is_compared_with_the_entry() -> None:
    front = {"name": "refunds", "description": "Refund a customer."}
    text = '---\nname: refunds\ndescription: "Refund a customer."\n---\n# Steps\n'
    assert check_frontmatter(text, front) is None
    folded = "---\nname: 'refunds'\ndescription: >-\n  Refund a\n  customer.\n---\n"
    assert check_frontmatter(folded, front) is None
    assert "name: the SKILL.md says 'other' where the entry says 'refunds'" in str(
        check_frontmatter("---\nname: other\ndescription: Refund a customer.\n---\n", front)
    )
    assert "does not start with" in str(check_frontmatter("# no frontmatter", front))


def test_only_files_of_the_manifest_resolve() -> None:
    inner = ref("skill://acme/billing/refunds/references/FORMS.md")
    held = entry(resources=(ref(), inner))
    assert resolve_skill_file(held, "references/FORMS.md") == inner
    assert resolve_skill_file(held, "./references//FORMS.md") == inner
    assert resolve_skill_file(held, inner.uri) == inner
    assert "does not list" in str(resolve_skill_file(held, "references/OTHER.md"))
    assert "not a file inside" in str(resolve_skill_file(held, "../refunds/SKILL.md"))
    assert "does not list" in str(resolve_skill_file(held, "skill://elsewhere/SKILL.md"))
    assert "dynamic" in str(resolve_skill_file(entry(resources="dynamic"), "SKILL.md"))
