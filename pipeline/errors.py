"""Errors raised by the Spark pipeline. Every one derives from :class:`PipelineError`."""

from __future__ import annotations


class PipelineError(Exception):
    """Raised when a pipeline job cannot run as asked; base of pipeline errors."""


class ColumnMappingError(PipelineError):
    """Raised when the column options do not fit the input (missing column, two time columns)."""


class PostingError(PipelineError):
    """Raised when a batch could not be posted after every retry."""
