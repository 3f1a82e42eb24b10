"""The one exception type the recorder raises for bad input."""


class RecordError(ValueError):
    """Bad input to tunefleet.record: the message names what to fix.

    When it is raised no bundle directory is left behind.
    """
