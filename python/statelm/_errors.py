"""The exceptions of statelm: one StatelmError subclass per slm_status of include/statelm.h.

Each carries the status code (``status``), its name (``status_name``, e.g. "SLM_ERR_STATE") and the
library's message naming what was wrong. The C extension raises them through ``by_status``.
"""

from __future__ import annotations


class StatelmError(Exception):
    """A statelm call failed. ``status`` is the slm_status code (None for errors of the binding
    itself), ``status_name`` its name, ``message`` the library's message."""

    status_code: int | None = None
    status_name: str | None = None

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message, status)
        self.message = message
        self.status = self.status_code if status is None else status
        self.status_name = _names.get(self.status, self.status_name)

    def __str__(self) -> str:
        return f"{self.status_name}: {self.message}" if self.status_name else self.message


# (status code, name, class name, extra builtin base): the SLM_STATUS_LIST of include/statelm.h.
_table = [
    (-1, "SLM_ERR_INVALID_ARG", "InvalidArgumentError", ValueError),
    (-2, "SLM_ERR_NOMEM", "OutOfMemoryError", MemoryError),
    (-3, "SLM_ERR_IO", "IOFailedError", OSError),
    (-4, "SLM_ERR_FORMAT", "FormatError", ValueError),
    (-5, "SLM_ERR_UNSUPPORTED", "UnsupportedError", None),
    (-6, "SLM_ERR_SHAPE", "ShapeError", ValueError),
    (-7, "SLM_ERR_RANGE", "RangeError", ValueError),
    (-8, "SLM_ERR_CONTEXT_FULL", "ContextFullError", None),
    (-9, "SLM_ERR_STATE", "StateError", None),
    (-10, "SLM_ERR_BACKEND", "BackendError", None),
    (-11, "SLM_ERR_ABORTED", "AbortedError", None),
    (-12, "SLM_ERR_NOT_FOUND", "NotFoundError", LookupError),
]
_names = {code: name for code, name, _, _ in _table}
by_status: dict[int, type] = {}
for _code, _name, _cls, _extra in _table:
    _bases = (StatelmError, _extra) if _extra else (StatelmError,)
    by_status[_code] = globals()[_cls] = type(_cls, _bases, {"status_code": _code, "status_name": _name,
                                                            "__module__": "statelm",
                                                            "__doc__": f"statelm status {_name}."})
InvalidArgumentError = by_status[-1]  # the base of ClosedError below


class ClosedError(InvalidArgumentError):
    """The model, session or snapshot was closed (status SLM_ERR_INVALID_ARG, as the C API answers
    a NULL handle)."""


class SessionBusyError(StatelmError, RuntimeError):
    """Another thread is running a call on the same session or sampler: a session is used by one
    thread at a time (the C API's rule), and the binding refuses the second call instead of
    racing."""


__all__ = ["StatelmError", "ClosedError", "SessionBusyError"] + [c for _, _, c, _ in _table]
