"""Suite-wide checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._proxy import EMPTY_ANSWERS


@pytest.fixture(autouse=True)
def _no_empty_answers() -> Iterator[None]:
    """No proxy a test started answered 200 with an empty assistant message (no text, no
    call): the client could not tell it from a lost answer. The test that caused one fails."""
    seen = len(EMPTY_ANSWERS)
    yield
    new = EMPTY_ANSWERS[seen:]
    if new:
        pytest.fail("200 answers with an empty assistant message:\n" + "\n".join(new), pytrace=False)
