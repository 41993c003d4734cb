"""What can go wrong on a board, as the toolchain's errors (one line each, their own exit codes)."""

from __future__ import annotations

from vtasm.errors import VtaError

EXIT_DEVICE_TIMEOUT = 5
EXIT_DEVICE_ERROR = 6


class DeviceTimeout(VtaError):
    """The device did not report completion within the timeout (its buffers are freed)."""

    exit_code = EXIT_DEVICE_TIMEOUT


class DeviceError(VtaError):
    """The board or its platform refused an operation (a register, a buffer, the bitstream)."""

    exit_code = EXIT_DEVICE_ERROR
