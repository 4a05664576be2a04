"""Job logging: every job writes its own log file, and a failure's message lands in it."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path


def show_progress() -> bool:
    """Progress bars on an interactive terminal, never in CI or in redirected output."""
    return sys.stderr.isatty() and not os.environ.get("CI")


@contextlib.contextmanager
def job_logging(path: str | os.PathLike | None, *, level: int = logging.INFO) -> Iterator[None]:
    """Send ``logging`` to ``path`` (and stderr) and record any exception before re-raising."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="w"))
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    try:
        yield
    except Exception as error:
        logging.getLogger("job").error("%s: %s", type(error).__name__, error)
        raise
    finally:
        for handler in handlers:
            handler.flush()
