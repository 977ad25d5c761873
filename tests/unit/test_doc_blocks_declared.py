"""Every fenced block of the README and the docs says what it is, and every skip says why.

The blocks themselves run in tests/integration/test_doc_blocks.py.
"""

from __future__ import annotations

from tests.docblocks import all_blocks


def test_every_fence_names_its_language():
    untagged = [b.where for b in all_blocks() if not b.language]
    assert not untagged, (
        "fences without a language (bash/python run in CI; text, yaml, toml, json do not): "
        f"{untagged}"
    )


def test_every_skipped_block_gives_its_reason():
    for block in all_blocks():
        if block.skip is not None:
            assert len(block.skip.split()) >= 3, f"{block.where}: say why it does not run"
