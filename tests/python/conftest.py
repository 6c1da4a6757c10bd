"""Fixtures shared by the Python suites."""
import pytest

from multirank import TRAINRUN, RankRunner


@pytest.fixture
def ranks():
    """Runs N ranks under the trainrun launcher (multirank.py); skips when the launcher is not built."""
    if not TRAINRUN.exists():
        pytest.skip("the trainrun launcher is not built (scripts/bazel.sh build //...)")
    return RankRunner()
