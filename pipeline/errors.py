"""Errors raised by the Spark pipeline. Every one derives from :class:`PipelineError`."""

from __future__ import annotations

import re


class PipelineError(Exception):
    """Raised when a pipeline job cannot run as asked; base of pipeline errors."""


class ColumnMappingError(PipelineError):
    """Raised when the column options do not fit the input (missing column, two time columns)."""


class PostingError(PipelineError):
    """Raised when a batch could not be posted after every retry."""


class JobFailedError(PipelineError):
    """Raised when Spark gave the job up (a task failed on every try): the message is the
    error that failed it, as its task raised it, not Spark's stack of it."""

    @classmethod
    def of(cls, error: Exception) -> JobFailedError:
        """The Python error at the root of Spark's report ``error``, else its first line."""
        lines = str(error).splitlines()
        raised = [m.group(1) for line in lines if (m := _RAISED.match(line.strip()))]
        why = raised[-1] if raised else next((line for line in lines if line.strip()), type(error).__name__)
        return cls(f"the Spark job failed: {why}")


# A line of a Python traceback that names what was raised: ``pkg.mod.SomeError: why``.
_RAISED = re.compile(r"^((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception): .*)$")
