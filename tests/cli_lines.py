"""The report's one error line for an argv, run in process: what the page's messages are held to."""
from __future__ import annotations

import contextlib
import io
from typing import Callable, Mapping, Sequence

from derive.cli import main

ERROR_PREFIX = "derive: error: "


def cli_message(argv: list[str], placeholders: Mapping[str, str],
                run: Callable[[Sequence[str]], int] = main, prefix: str = ERROR_PREFIX) -> str:
    """``derive report``'s (or ``run``'s) one error line for ``argv``, each placeholder's text replaced by ``{name}``."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = run(argv)
        except SystemExit as exit_:
            status = exit_.code
    line = err.getvalue()
    if status != 2 or line.count("\n") != 1 or not line.startswith(prefix):
        raise ValueError(f"argv: {argv} gave status {status} and {line!r}, not one error line")
    message = line[len(prefix):].rstrip("\n")
    for name, text in sorted(placeholders.items(), key=lambda item: -len(item[1])):
        if text not in message:
            raise ValueError(f"argv: the error {message!r} does not show {text!r}")
        message = message.replace(text, "{" + name + "}")
    return message
