"""The usage-error base class (gittinseval/utils/errors.py) and how the command-line apps treat it."""

import pytest

from gittinseval.cli.errors import USAGE_ERROR, run_app
from gittinseval.live.run_store import StoreLockedError
from gittinseval.utils.errors import UsageError
from gittinseval.utils.validation import ConfigError, positive_int


@pytest.fixture(autouse=True)
def _a_bare_command_line(monkeypatch):
    """run_app parses the command line first: the app's, not pytest's options."""
    monkeypatch.setattr("sys.argv", ["gittinseval"])


class OddSetting(UsageError):
    """A usage error of some layer the command-line apps know nothing about."""


def test_the_errors_of_settings_and_stores_are_usage_errors():
    assert issubclass(ConfigError, UsageError) and issubclass(ConfigError, ValueError)
    assert issubclass(StoreLockedError, UsageError) and issubclass(StoreLockedError, RuntimeError)
    with pytest.raises(UsageError, match="batch_size must be"):
        positive_int("batch_size", 0)


def test_any_usage_error_is_one_line_and_exit_code_2(capsys):
    def app():
        raise OddSetting("the odd setting is odd\nand says so twice")

    with pytest.raises(SystemExit) as exit_info:
        run_app("gittinseval", app)
    assert exit_info.value.code == USAGE_ERROR
    assert capsys.readouterr().err == "gittinseval: error: the odd setting is odd; and says so twice\n"


def test_an_error_that_is_not_a_usage_error_keeps_its_trace():
    def app():
        raise KeyError("a bug")

    with pytest.raises(KeyError, match="a bug"):
        run_app("gittinseval", app)
